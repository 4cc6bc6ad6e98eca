#!/usr/bin/env bash
# Issue 11's joins on the H100, one device call: the CSR tests on CUDA (plain, memcheck, racecheck), then
# hashtile-bench csr at 2^25 keys, range factor 1 and 1 / 4 / 32 duplicates per key, from this tree's binary
# and from hashtile-bench-old (the previous code, packed beside it) alternately in the same call, then ncu's
# kernel times of one run at 32 duplicates per key. Results: $OUT/results.tgz.
set -u
source scripts/device_lib.sh
cd $B
if [ -z "${SKIP_TESTS:-}" ]; then
step csr_tests 120 ./csr cuda_ --test-threads 1
step csr_memcheck 200 compute-sanitizer --tool memcheck --error-exitcode 9 ./csr cuda_ --test-threads 1
step csr_racecheck 200 compute-sanitizer --tool racecheck --error-exitcode 9 ./csr cuda_ --test-threads 1
fi
args="csr --backend cuda --log2-keys 25 --dups ${DUPS:-1,4,32} --range 1 --builds v2 --runs $RUNS"
for round in ${ROUNDS:-1}; do
  for v in new old; do
    bin=./hashtile-bench; [ $v = old ] && bin=./hashtile-bench-old
    [ -x $bin ] || continue
    step $v$round 200 $bin $args --csv "$OUT/$v$round.csv"
    grep -E "^aim|device .* (join|find_all)|host .* (find_all|join)" "$OUT/$v$round.txt"
  done
done
if [ -n "${NCU:-}" ]; then
step ncu 200 ncu --clock-control none --metrics gpu__time_duration.sum \
  --kernel-name regex:"csr_|scan_|iota|sum_blocks|fill|bin|place" --csv \
  ./hashtile-bench csr --backend cuda --log2-keys 25 --dups 32 --range 1 --builds v2 --runs 1 --csv "$OUT/ncu_bench.csv"
fi
