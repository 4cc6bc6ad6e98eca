# Session 8, landed code: SlabHash and hashtile-bench chained (every experiment) in one call, then tests and sanitizers.
t0=$SECONDS
OUT2=$OUT; OUT=/tmp/out2 RUNS=5 bash scripts/h100_chained_bench.sh 2>&1 | grep -vE "^wrote"; OUT=$OUT2; mkdir -p $OUT/bench && cp /tmp/out2/results.tgz $OUT/bench/
source scripts/device_lib.sh
cd $B
step chained_tests 90 ./chained --test-threads 1
step chained_memcheck 200 compute-sanitizer --tool memcheck --error-exitcode 9 ./chained --test-threads 1
step chained_racecheck 150 compute-sanitizer --tool racecheck --error-exitcode 9 ./chained --test-threads 1
