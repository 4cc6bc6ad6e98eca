#!/usr/bin/env bash
# Device machine, issue 9 acceptance in one call: the CUDA matrix (every instance and the new rule tests), the
# static schemes at B = 16 (BCHT, IHT with BGHT's secondary rule `--num-hashes 2` and with the paper's `3`,
# P2BHT), 1CHT, BCHT B = 8 with the duplicate check (upsert), then BGHT and cuCollections built and run by the
# peers' script, then memcheck and racecheck on the new rule tests. Everything goes back as $OUT/results.tgz
# (the device tool returns at most 8 files). Carry .device (scripts/pack_device.sh, and peers).
# Usage: RUNS=3 bash scripts/h100_issue9_final.sh
set -u
t0=$SECONDS
source scripts/device_lib.sh
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem --format=csv,noheader | tee "$OUT/gpu.txt"
HASHTILE_REQUIRE_GPU=cuda timeout 150 $B/matrix --test-threads 1 cuda > "$OUT/matrix.txt" 2>&1
echo "== matrix tests (exit $?) at $((SECONDS - t0)) s"; grep -E "test result|FAILED|panicked" "$OUT/matrix.txt" | head -4
bench iht16_h2 $B/hashtile-bench --scheme iht --bucket 16 --load 0.8,0.9 --no-upsert --num-hashes 2
bench iht16_h3 $B/hashtile-bench --scheme iht --bucket 16 --load 0.8,0.9 --no-upsert
bench p2bht16 $B/hashtile-bench --scheme p2bht --bucket 16 --load 0.8,0.9 --no-upsert
bench bcht16 $B/hashtile-bench --scheme bcht --bucket 16 --load 0.8,0.9 --no-upsert
bench cht1 $B/hashtile-bench --scheme 1cht --bucket 1 --load 0.8,0.9 --no-upsert
bench bcht8_upsert $B/hashtile-bench --scheme bcht --bucket 8 --load 0.8,0.9
bench bcht8_no_upsert $B/hashtile-bench --scheme bcht --bucket 8 --load 0.8,0.9 --no-upsert
SLAB=0 timeout 200 bash .device/peers/run.sh 26 0.8,0.9 > "$OUT/peers.csv" 2> "$OUT/peers_err.txt"
echo "== peers at $((SECONDS - t0)) s: $(grep -E "^bght,(bcht,(8|16)|iht|p2bht|1cht)|^cuco,(dh,4|lp,1)," "$OUT/peers.csv" | cut -d, -f2,3,5,6,7 | tr '\n' ' ')"
for tool in memcheck racecheck; do
  timeout 120 compute-sanitizer --tool $tool $B/matrix --test-threads 1 cuda_iht_one_sequence_b16 cuda_bcht_upsert_first_fit_b8 cuda_one_slot_bulk_build cuda_cht1 cuda_iht_b16_u32_u32 > "$OUT/sanitize_$tool.txt" 2>&1
  echo "== $tool (exit $?) at $((SECONDS - t0)) s: $(grep -E "test result|ERROR SUMMARY" "$OUT/sanitize_$tool.txt" | tr '\n' ' ')"
done
echo "== all done at $((SECONDS - t0)) s"
