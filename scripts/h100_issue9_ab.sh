#!/usr/bin/env bash
# Device machine, issue 9 A/B: IHT (h = 2 and 3) and 1CHT (blind exchanges on / off) of this tree against the
# previous binary (hashtile-bench-old), with ncu's register counts of the insert and find kernels. One archive
# (results.tgz) under $OUT. Carry .device (scripts/pack_device.sh /tmp/hashtile-bench-old).
# The blind-exchange mode (and its HASHTILE_BLIND_EXCHANGE switch) was removed after this measurement
# (docs/PERFORMANCE.md): on today's tree the cht1_blind and cht1_read rows run the same driver.
set -u
t0=$SECONDS
source scripts/device_lib.sh
HASHTILE_REQUIRE_GPU=cuda timeout 150 $B/matrix --test-threads 1 cuda_iht cuda_one_slot cuda_cht1 cuda_bcht > "$OUT/matrix.txt" 2>&1
echo "== matrix tests (exit $?) at $((SECONDS - t0)) s"; grep -E "test result|FAILED|panicked" "$OUT/matrix.txt" | head -4
for round in 1 2; do
  bench iht_h3_new_$round $B/hashtile-bench --scheme iht --bucket 16 --load 0.8,0.9 --no-upsert
  bench iht_h3_old_$round $B/hashtile-bench-old --scheme iht --bucket 16 --load 0.8,0.9 --no-upsert
  bench iht_h2_new_$round $B/hashtile-bench --scheme iht --bucket 16 --load 0.8,0.9 --no-upsert --num-hashes 2
  bench cht1_blind_$round $B/hashtile-bench --scheme 1cht --bucket 1 --load 0.8 --no-upsert
  HASHTILE_BLIND_EXCHANGE=0 bench cht1_read_$round $B/hashtile-bench --scheme 1cht --bucket 1 --load 0.8 --no-upsert
  bench cht1_old_$round $B/hashtile-bench-old --scheme 1cht --bucket 1 --load 0.8 --no-upsert
done
bench bcht8_upsert_new $B/hashtile-bench --scheme bcht --bucket 8 --load 0.8,0.9
M=gpu__time_duration.sum,smsp__inst_executed.sum,launch__registers_per_thread
ncu_run() { # name args...
  local name=$1; shift
  timeout 60 ncu --clock-control none --metrics $M --kernel-name regex:"insert_kernel|find_kernel" --launch-skip 1 --launch-count 4 --csv \
    "$@" --backend cuda --log2-keys 24 --runs 1 --load 0.8 --csv /tmp/n.csv > "$OUT/ncu_$name.csv" 2>&1
  echo "== ncu $name: $(grep -E "registers_per_thread|duration.sum|executed.sum" "$OUT/ncu_$name.csv" | awk -F'","' '{n=split($5,a,"_"); printf "%s:%s=%s ", a[1], $(NF-2), $NF}' | sed 's/"//g')"
}
ncu_run iht_h3_new $B/hashtile-bench --scheme iht --bucket 16 --no-upsert
ncu_run iht_h3_old $B/hashtile-bench-old --scheme iht --bucket 16 --no-upsert
ncu_run iht_h2_new $B/hashtile-bench --scheme iht --bucket 16 --no-upsert --num-hashes 2
ncu_run cht1_blind $B/hashtile-bench --scheme 1cht --bucket 1 --no-upsert
ncu_run bcht8_new $B/hashtile-bench --scheme bcht --bucket 8
ncu_run bcht8_old $B/hashtile-bench-old --scheme bcht --bucket 8
echo "== all done at $((SECONDS - t0)) s"
