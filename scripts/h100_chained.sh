#!/usr/bin/env bash
# Issue 10 on the H100, one device call: the chained-table tests on CUDA (the GPU store against the multimap),
# then under memcheck and racecheck. Results: $OUT/results.tgz.
set -u
source scripts/device_lib.sh
cd $B
step() { # name timeout cmd...
  local name=$1 limit=$2; shift 2
  timeout "$limit" "$@" > "$OUT/$name.txt" 2>&1
  echo "== $name (exit $?) at $((SECONDS - t0)) s: $(grep -E 'test result|ERROR SUMMARY|RACECHECK SUMMARY' "$OUT/$name.txt" | tr '\n' ' ')"
}
step chained_tests 120 ./chained --test-threads 1
step chained_memcheck 300 compute-sanitizer --tool memcheck --error-exitcode 9 ./chained cuda_ --test-threads 1
step chained_racecheck 300 compute-sanitizer --tool racecheck --error-exitcode 9 ./chained cuda_ --test-threads 1
