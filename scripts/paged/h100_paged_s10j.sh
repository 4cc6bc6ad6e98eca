# Session 10, call J: the final commit's paged tests on CUDA (after the kernels' shared-counter helper).
t0=$SECONDS
source scripts/device_lib.sh
step paged_tests 150 env HASHTILE_REQUIRE_GPU=cuda $B/paged --test-threads 4
grep -E "panicked|FAILED|failed" $OUT/paged_tests.txt | head -5
step host_path_tests 100 env HASHTILE_REQUIRE_GPU=cuda $B/host_path
