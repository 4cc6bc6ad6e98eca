#!/usr/bin/env bash
# Device machine, issue 9 (second round): BCHT's first-fit upsert, IHT with one secondary sequence
# (`--num-hashes 2`), one-lane tiles without plane operations (1CHT), each against the previous binary
# (hashtile-bench-old) and BGHT / cuCollections (peers) in the same call, plus ncu registers, instructions and
# durations of the 1CHT insert kernels (hashtile new / old, BGHT's cht).
# Carry .device (bins.tar.xz from scripts/pack_device.sh /tmp/hashtile-bench-old, and peers).
# Usage: RUNS=3 bash scripts/h100_issue9.sh [ncu]
set -u
t0=$SECONDS
source scripts/device_lib.sh
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem --format=csv,noheader
HASHTILE_REQUIRE_GPU=cuda timeout 150 $B/matrix --test-threads 1 cuda > "$OUT/matrix.txt" 2>&1
echo "== matrix tests (exit $?) at $((SECONDS - t0)) s"; grep -E "test result|FAILED|panicked" "$OUT/matrix.txt" | head -4
for v in new old; do
  bin=$B/hashtile-bench; [ $v = old ] && bin=$B/hashtile-bench-old
  bench bcht8_upsert_$v $bin --scheme bcht --bucket 8 --load 0.8,0.9
  bench bcht8_noup_$v $bin --scheme bcht --bucket 8 --load 0.8,0.9 --no-upsert
  bench iht16_h3_noup_$v $bin --scheme iht --bucket 16 --load 0.8,0.9 --no-upsert
  bench cht1_noup_$v $bin --scheme 1cht --bucket 1 --load 0.8 --no-upsert
done
bench iht16_h2_noup_new $B/hashtile-bench --scheme iht --bucket 16 --load 0.8,0.9 --no-upsert --num-hashes 2
bench iht16_h2_upsert_new $B/hashtile-bench --scheme iht --bucket 16 --load 0.8,0.9 --num-hashes 2
bench p2bht16_noup_new $B/hashtile-bench --scheme p2bht --bucket 16 --load 0.8 --no-upsert
bench bcht16_new $B/hashtile-bench --scheme bcht --bucket 16 --load 0.8,0.9 --no-upsert
SLAB=0 timeout 200 bash .device/peers/run.sh 26 0.8,0.9 > "$OUT/peers.csv" 2> "$OUT/peers_err.txt"
echo "== peers (exit $?) at $((SECONDS - t0)) s"; grep -E "^bght,(bcht,(8|16)|iht|p2bht|1cht)|^cuco,dh,4" "$OUT/peers.csv" | tr "\n" " "; echo
if [ "${1:-}" = ncu ]; then
  M=gpu__time_duration.sum,smsp__inst_executed.sum,launch__registers_per_thread
  for v in new old; do
    bin=$B/hashtile-bench; [ $v = old ] && bin=$B/hashtile-bench-old
    timeout 90 ncu --clock-control none --metrics $M --kernel-name regex:"insert_kernel" --launch-count 3 --csv \
      $bin --backend cuda --log2-keys 26 --runs 1 --scheme 1cht --bucket 1 --load 0.8 --no-upsert --csv /tmp/n.csv > "$OUT/ncu_1cht_$v.csv" 2>&1
    echo "== ncu 1cht $v (exit $?) at $((SECONDS - t0)) s"; grep -E "insert_kernel" "$OUT/ncu_1cht_$v.csv" | grep -oE "(duration.sum|per_thread|executed.sum)\",\"[^\"]*\",\"[^\"]*\"" | head -9
  done
  timeout 120 ncu --clock-control none --metrics $M --kernel-name regex:"^insert_kernel" --launch-count 2 --csv \
    .device/peers/bin/bght_bench 26 0.8 > "$OUT/ncu_bght_cht.csv" 2>&1
  echo "== ncu bght cht (exit $?) at $((SECONDS - t0)) s"; grep -E "insert_kernel" "$OUT/ncu_bght_cht.csv" | grep -oE "(duration.sum|per_thread|executed.sum)\",\"[^\"]*\",\"[^\"]*\"" | head -6
fi
echo "== all done at $((SECONDS - t0)) s"
