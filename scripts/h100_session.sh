#!/usr/bin/env bash
# Device machine, one call (<= 10 min): the CUDA tests (release test binaries carried in .device/), the 2^26
# rates of BCHT at B = 16 and 8, new build against a baseline build ($BASE, if carried) run alternately in the
# same call, and an ncu look at the insert kernel (registers, occupancy, throughput, stalls).
# Usage: bash scripts/h100_session.sh   (BIN, BASE: bench binaries; OUT: result folder)
set -u
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}
export PATH=/usr/local/cuda/bin:$PATH
BIN=${BIN:-.device/hashtile-bench}
BASE=${BASE:-.device/hb_base}
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,memory.total --format=csv | tee "$OUT/gpu.txt"
# CUDA tests: every result against the oracle; a missing CUDA device is a failure here.
for t in .device/gpu .device/matrix; do
  echo "== $t"
  HASHTILE_REQUIRE_GPU=cuda $t --test-threads 1 cuda 2>&1 | grep -E "^test |result|panicked|SKIPPED|probes" | tee -a "$OUT/tests.txt"
done
for b in 16 8; do
  for bin in $BIN $BASE; do
    [ -x "$bin" ] || continue
    echo "== $bin B=$b"
    $bin --backend cuda --log2-keys 26 --bucket $b --load 0.8,0.9 --runs 5 --csv "$OUT/$(basename $bin)_b$b.csv" 2>&1 | grep -E "^\| bcht|check|rror"
  done
done
$BIN --backend cuda --log2-keys 26 --bucket 16,8 --load 0.8,0.9 --runs 5 --no-upsert --csv "$OUT/noupsert.csv" 2>&1 | grep -E "insert|check|rror"
# ncu last: it can run long (keep its timeout well inside the call's limit).
timeout 120 ncu --clock-control none -k regex:insert --launch-skip 1 --launch-count 1 \
  --section LaunchStats --section Occupancy --section SpeedOfLight --section WarpStateStats --section SchedulerStats \
  $BIN --backend cuda --log2-keys 24 --bucket 16 --load 0.8 --runs 1 --csv /tmp/y.csv > "$OUT/ncu_insert.txt" 2>&1
grep -E "Registers Per|Achieved Occupancy|Theoretical Occupancy|Duration|Compute \(SM\) Throughput|DRAM Throughput|Issued Warp|Eligible Warps" "$OUT/ncu_insert.txt"
