# Session 8, call H: the chained tests on CUDA after the typed out-of-memory growth, memcheck over them.
t0=$SECONDS
source scripts/device_lib.sh
cd $B
step chained_tests 120 ./chained --test-threads 1
step chained_memcheck 200 compute-sanitizer --tool memcheck --error-exitcode 9 ./chained --test-threads 1
grep -E "^test |panicked" $OUT/chained_tests.txt | head -30
