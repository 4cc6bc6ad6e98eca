# Session 14, call A: prefetching page-ins (a child's copy queued on the swap stream while the previous child's
# kernels run; page-outs on a copy-out stream of their own). Paged tests on CUDA (the new prefetch test among
# them), memcheck and racecheck on the prefetch test, then the 16 GiB table under 4 GiB with prefetching on
# and off (HASHTILE_NO_PREFETCH=1), in turn, twice each.
t0=$SECONDS
source scripts/device_lib.sh
step paged_tests 200 env HASHTILE_REQUIRE_GPU=cuda $B/paged --test-threads 4
grep -E "panicked|FAILED|failed" $OUT/paged_tests.txt | head -5
step frames_tests 100 env HASHTILE_REQUIRE_GPU=cuda $B/paged_frames
step memcheck_prefetch 150 compute-sanitizer --tool memcheck env HASHTILE_REQUIRE_GPU=cuda $B/paged prefetch
step racecheck_prefetch 150 compute-sanitizer --tool racecheck env HASHTILE_REQUIRE_GPU=cuda $B/paged prefetch
export TAIL=1
for r in 1 2; do
  paged_bench big16_on_$r 100 --experiments big --big-gib 16 --big-budget-gib 4
  export HASHTILE_NO_PREFETCH=1
  paged_bench big16_off_$r 100 --experiments big --big-gib 16 --big-budget-gib 4
  unset HASHTILE_NO_PREFETCH
done
echo "total $((SECONDS - t0)) s"
