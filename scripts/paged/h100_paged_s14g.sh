# Session 14, call G: the final code on CUDA: every GPU test binary the stager's changes reach (downloads into
# pinned memory now run on a copy-out stream; page-ins are queued), memcheck on the host-path and paged-frames
# tests, one 16 GiB row with prefetching, and the confined rebuild and growth rows on the final code.
t0=$SECONDS
source scripts/device_lib.sh
step host_path_tests 120 env HASHTILE_REQUIRE_GPU=cuda $B/host_path
step gpu_tests 200 env HASHTILE_REQUIRE_GPU=cuda $B/gpu
step csr_tests 120 $B/csr cuda_ --test-threads 1
step chained_tests 150 $B/chained --test-threads 1
step paged_tests 200 env HASHTILE_REQUIRE_GPU=cuda $B/paged --test-threads 4
step frames_tests 100 env HASHTILE_REQUIRE_GPU=cuda $B/paged_frames
step stress_tests 150 env HASHTILE_REQUIRE_GPU=cuda $B/paged_stress
grep -hE "panicked|FAILED" $OUT/*_tests.txt | head -5
step memcheck_host_path 200 compute-sanitizer --tool memcheck env HASHTILE_REQUIRE_GPU=cuda $B/host_path
step memcheck_frames 150 compute-sanitizer --tool memcheck env HASHTILE_REQUIRE_GPU=cuda $B/paged_frames --test-threads 1
export TAIL=1
paged_bench big16 100 --experiments big --big-gib 16 --big-budget-gib 4
export TAIL=3
paged_bench rebuild 120 --experiments rebuild --log2-keys 26 --runs 5
paged_bench growth 150 --experiments growth --child-mib 64 --log2-keys 26 --log2-batch 20
echo "total $((SECONDS - t0)) s"
