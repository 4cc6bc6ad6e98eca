# Session 9, call B: paged tables on CUDA after the device rebuilds: tests, memcheck, racecheck; then the experiments.
t0=$SECONDS
source scripts/device_lib.sh
cd $B
step paged_tests 100 env HASHTILE_REQUIRE_GPU=cuda ./paged --test-threads 4
grep -E "panicked|FAILED|failed" $OUT/paged_tests.txt | head -5
step host_path_tests 100 env HASHTILE_REQUIRE_GPU=cuda ./host_path
step paged_memcheck 170 env HASHTILE_REQUIRE_GPU=cuda compute-sanitizer --tool memcheck --error-exitcode 9 ./paged --test-threads 1
step paged_racecheck 170 env HASHTILE_REQUIRE_GPU=cuda compute-sanitizer --tool racecheck --error-exitcode 9 ./paged --test-threads 1 forced growth
cd - > /dev/null
paged_bench rebuild 40 --experiments rebuild --log2-keys 26 --runs 3
paged_bench growth 60 --experiments growth --log2-keys 26 --log2-batch 20
