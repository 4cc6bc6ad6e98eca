# Session 10, call I: the review fixes on CUDA: the paged tests (16), memcheck and racecheck of the new ones.
t0=$SECONDS
source scripts/device_lib.sh
step paged_tests 150 env HASHTILE_REQUIRE_GPU=cuda $B/paged --test-threads 4
grep -E "panicked|FAILED|failed" $OUT/paged_tests.txt | head -5
step paged_memcheck 200 env HASHTILE_REQUIRE_GPU=cuda compute-sanitizer --tool memcheck --error-exitcode 9 $B/paged --test-threads 1 review random_rounds
step paged_racecheck 200 env HASHTILE_REQUIRE_GPU=cuda compute-sanitizer --tool racecheck --error-exitcode 9 $B/paged --test-threads 1 review
