#!/usr/bin/env bash
# Issue 11 on the H100, one device call: the CSR and scan tests on CUDA (plain, then memcheck and racecheck),
# then hashtile-bench csr at 2^25 keys (build methods and lookup tiles at 1 and 32 duplicates per key and
# range factor 1: the aims, against BCHT's device insert in the same run; then the sweep over
# duplicates and hash ranges for the plots) and hashtile-bench scan. Results: $OUT/results.tgz.
set -u
source scripts/device_lib.sh
cd $B
if [ -z "${SKIP_TESTS:-}" ]; then
step csr_tests 120 ./csr cuda_ --test-threads 1
step scan_tests 60 ./gpu_scan cuda --test-threads 1
step csr_memcheck 200 compute-sanitizer --tool memcheck --error-exitcode 9 ./csr cuda_ --test-threads 1
step csr_racecheck 200 compute-sanitizer --tool racecheck --error-exitcode 9 ./csr cuda_csr_matches_cpu --test-threads 1
fi
step aims 200 ./hashtile-bench csr --backend cuda --log2-keys 25 --dups 1,32 --range 1 \
  --builds ${BUILDS:-v2,v2:1024,v2:2048,v1} --tiles ${TILES:-4,1,32} --runs $RUNS --csv "$OUT/csr_aims.csv"
grep -E "^aim|BCHT|device .* (build|count|find_all|join)" "$OUT/aims.txt" | head -60
if [ -n "${NCU:-}" ]; then
step ncu 150 ncu --clock-control none --metrics gpu__time_duration.sum --kernel-name regex:"csr_|scan_|fill|insert|iota|sum_blocks" \
  --csv ./hashtile-bench csr --backend cuda --log2-keys 25 --dups 1 --range 1 --builds $NCU --tiles 4 --runs 1 --csv "$OUT/ncu_bench.csv"
fi
[ -n "${SKIP_SWEEP:-}" ] || step sweep 330 ./hashtile-bench csr --backend cuda --log2-keys 25 --dups 1,4,32 --range 0.5,1,2 \
  --runs $RUNS --csv "$OUT/csr_sweep.csv"
grep -E "^aim" "$OUT/sweep.txt" | head -40
step scan 60 ./hashtile-bench scan --backend cuda --log2-words 16,20,24,25,26,28 --runs 5 --csv "$OUT/scan.csv"
tail -9 "$OUT/scan.txt"
