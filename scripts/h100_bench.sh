#!/usr/bin/env bash
# Runs on the device machine: correctness sweep over bucket sizes, then the 2^26-key benchmark.
# Usage (from the repo root, with the release binary carried): bash scripts/h100_bench.sh
set -u
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}
BIN=./target/release/hashtile-bench
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,memory.total --format=csv | tee "$OUT/gpu.txt"
for b in 1 2 4 8 16 32; do
  $BIN --backend cuda --log2-keys 18 --bucket $b --load 0.5,0.8 --runs 1 --csv "$OUT/check_b$b.csv" 2>&1 | grep -E "insert|find|error|MISMATCH" | sed "s/^/[B=$b] /"
done
$BIN --backend cuda --log2-keys 26 --bucket 16 --load 0.8,0.9 --runs 5 --csv "$OUT/h100_b16.csv" 2>&1 | tail -12
$BIN --backend cuda --log2-keys 26 --bucket 8 --load 0.8,0.9 --runs 5 --csv "$OUT/h100_b8.csv" 2>&1 | tail -12
