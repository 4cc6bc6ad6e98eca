# Session 10, call F: tombstone erase on CUDA. The paged tests, then memcheck and racecheck of the tombstone
# and device-routing tests (the erase kernel is new).
t0=$SECONDS
source scripts/device_lib.sh
step paged_tests 100 env HASHTILE_REQUIRE_GPU=cuda $B/paged --test-threads 4
grep -E "panicked|FAILED|failed" $OUT/paged_tests.txt | head -5
step paged_memcheck 200 env HASHTILE_REQUIRE_GPU=cuda compute-sanitizer --tool memcheck --error-exitcode 9 $B/paged --test-threads 1 tombstone device_routing iht
step paged_racecheck 200 env HASHTILE_REQUIRE_GPU=cuda compute-sanitizer --tool racecheck --error-exitcode 9 $B/paged --test-threads 1 tombstone
step host_path_tests 100 env HASHTILE_REQUIRE_GPU=cuda $B/host_path
