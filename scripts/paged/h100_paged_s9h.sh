# Session 9, call H: the paged tests after the review fixes on CUDA, memcheck and racecheck.
t0=$SECONDS
source scripts/device_lib.sh
cd $B
step paged_tests 100 env HASHTILE_REQUIRE_GPU=cuda ./paged --test-threads 4
grep -E "panicked|FAILED|failed" $OUT/paged_tests.txt | head -5
step paged_memcheck 200 env HASHTILE_REQUIRE_GPU=cuda compute-sanitizer --tool memcheck --error-exitcode 9 ./paged --test-threads 1
step paged_racecheck 200 env HASHTILE_REQUIRE_GPU=cuda compute-sanitizer --tool racecheck --error-exitcode 9 ./paged --test-threads 1 nested full forced wide
step host_path_tests 100 env HASHTILE_REQUIRE_GPU=cuda ./host_path
