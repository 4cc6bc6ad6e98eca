#!/usr/bin/env bash
# Device machine, issue 9 acceptance in one call: the CUDA matrix (every instance and the new rule tests), the
# static schemes at B = 16 (BCHT, IHT with BGHT's secondary rule `--num-hashes 2` and with the paper's `3`,
# P2BHT), 1CHT, BCHT B = 8 with the duplicate check (upsert), then BGHT and cuCollections built and run by the
# peers' script, then memcheck and racecheck on the new rule tests. Everything goes back as $OUT/results.tgz
# (the device tool returns at most 8 files). Carry .device (scripts/pack_device.sh, and peers).
# Usage: RUNS=3 bash scripts/h100_issue9_final.sh
set -u
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}
export PATH=/usr/local/cuda/bin:$PATH
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
RUNS=${RUNS:-3}
t0=$SECONDS
trap '(cd "$OUT" && tar -czf /tmp/results.tgz --exclude results.tgz . && find . -type f ! -name results.tgz -delete && mv /tmp/results.tgz .)' EXIT
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem --format=csv,noheader | tee "$OUT/gpu.txt"
B=/tmp/bin; rm -rf $B; mkdir -p $B && tar -xJf .device/bins.tar.xz -C $B
HASHTILE_REQUIRE_GPU=cuda timeout 150 $B/matrix --test-threads 1 cuda > "$OUT/matrix.txt" 2>&1
echo "== matrix tests (exit $?) at $((SECONDS - t0)) s"; grep -E "test result|FAILED|panicked" "$OUT/matrix.txt" | head -4
row() { grep -E "^\| (iht|p2bht|1cht|bcht) " "$1" | grep -v async | awk -F'|' '{gsub(/ /,"",$4);gsub(/ /,"",$5);gsub(/ /,"",$6);gsub(/ /,"",$7); printf "%s %s%s=%.2f  ", $4,$5,$6,$7/1000}'; echo; }
bench() { local name=$1; shift
  timeout 150 $B/hashtile-bench --backend cuda --log2-keys 26 --runs "$RUNS" --csv "$OUT/$name.csv" "$@" > "$OUT/$name.txt" 2>&1
  echo "== $name (exit $?) at $((SECONDS - t0)) s: $(row "$OUT/$name.txt")"; }
bench iht16_h2 --scheme iht --bucket 16 --load 0.8,0.9 --no-upsert --num-hashes 2
bench iht16_h3 --scheme iht --bucket 16 --load 0.8,0.9 --no-upsert
bench p2bht16 --scheme p2bht --bucket 16 --load 0.8,0.9 --no-upsert
bench bcht16 --scheme bcht --bucket 16 --load 0.8,0.9 --no-upsert
bench cht1 --scheme 1cht --bucket 1 --load 0.8,0.9 --no-upsert
bench bcht8_upsert --scheme bcht --bucket 8 --load 0.8,0.9
bench bcht8_no_upsert --scheme bcht --bucket 8 --load 0.8,0.9 --no-upsert
SLAB=0 timeout 200 bash .device/peers/run.sh 26 0.8,0.9 > "$OUT/peers.csv" 2> "$OUT/peers_err.txt"
echo "== peers at $((SECONDS - t0)) s: $(grep -E "^bght,(bcht,(8|16)|iht|p2bht|1cht)|^cuco,(dh,4|lp,1)," "$OUT/peers.csv" | cut -d, -f2,3,5,6,7 | tr '\n' ' ')"
for tool in memcheck racecheck; do
  timeout 120 compute-sanitizer --tool $tool $B/matrix --test-threads 1 cuda_iht_one_sequence_b16 cuda_bcht_upsert_first_fit_b8 cuda_one_slot_bulk_build cuda_1cht cuda_iht_b16_u32_u32 > "$OUT/sanitize_$tool.txt" 2>&1
  echo "== $tool (exit $?) at $((SECONDS - t0)) s: $(grep -E "test result|ERROR SUMMARY" "$OUT/sanitize_$tool.txt" | tr '\n' ' ')"
done
echo "== all done at $((SECONDS - t0)) s"
