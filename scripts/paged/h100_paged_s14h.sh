# Session 14, call H: after the re-read (both CUDA uploads share upload_targets): host-path, paged, frames and
# stress tests on CUDA, memcheck on the prefetch test, one 16 GiB row.
t0=$SECONDS
source scripts/device_lib.sh
step host_path_tests 120 env HASHTILE_REQUIRE_GPU=cuda $B/host_path
step paged_tests 200 env HASHTILE_REQUIRE_GPU=cuda $B/paged --test-threads 4
step frames_tests 100 env HASHTILE_REQUIRE_GPU=cuda $B/paged_frames
step stress_tests 150 env HASHTILE_REQUIRE_GPU=cuda $B/paged_stress
grep -hE "panicked|FAILED" $OUT/*_tests.txt | head -5
step memcheck_prefetch 150 compute-sanitizer --tool memcheck env HASHTILE_REQUIRE_GPU=cuda $B/paged prefetch
export TAIL=1
paged_bench big16 100 --experiments big --big-gib 16 --big-budget-gib 4
echo "total $((SECONDS - t0)) s"
