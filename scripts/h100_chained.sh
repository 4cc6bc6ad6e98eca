#!/usr/bin/env bash
# Issue 10 on the H100, one device call: the chained-table tests on CUDA (the GPU store against the multimap),
# then under memcheck and racecheck. Results: $OUT/results.tgz.
set -u
source scripts/device_lib.sh
cd $B
step chained_tests 120 ./chained --test-threads 1
# The whole binary: most GPU tests run ChainedTable on every backend present, not only the `cuda_` ones.
step chained_memcheck 300 compute-sanitizer --tool memcheck --error-exitcode 9 ./chained --test-threads 1
step chained_racecheck 300 compute-sanitizer --tool racecheck --error-exitcode 9 ./chained --test-threads 1
