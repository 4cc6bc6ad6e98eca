#!/usr/bin/env bash
# Device machine: insert-path variants at 2^24 keys (B = 16, load 0.8), the Vulkan (exchange) path on CUDA
# for correctness, and a dump of the generated CUDA sources.
set -u
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}
BIN=./target/release/hashtile-bench
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
run() { echo "== $*"; $BIN --backend cuda --runs 3 --load 0.8 --csv "$OUT/v.csv" "$@" 2>&1 | grep -E "insert|find \| 100|error|MISMATCH|failed"; }
CUBECL_DEBUG_LOG="$OUT/kernels.log" $BIN --backend cuda --log2-keys 12 --runs 1 --load 0.8 --csv /tmp/x.csv > /dev/null 2>&1
run --log2-keys 24
run --log2-keys 24 --no-upsert
run --log2-keys 24 --reads atomic
run --log2-keys 24 --claim exchange --reads atomic
for b in 8 16; do run --log2-keys 16 --bucket $b --claim exchange --reads atomic; done
