#!/usr/bin/env bash
# Device machine: the issue-3 sweep at 2^26 keys into $OUT/<name>.tar.gz, packed on exit even when cut short (the
# sweep rewrites its outputs after every scheme of every experiment; `--experiments` finishes a cut-short run).
# Usage (repo root, release bench binary at $BIN):
#   bash scripts/h100_sweep.sh b16   --scheme bcht,iht,p2bht,1cht --bucket 16
#   bash scripts/h100_sweep.sh iht32 --scheme iht:32
# Measured 2026-11-23 on the H100: ~400 s for b16 (four schemes), ~100 s for iht32.
set -u
name=$1; shift
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}
BIN=${BIN:-.device/hashtile-bench}
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT" "/tmp/sweep/$name"
trap 'tar czf "$OUT/$name.tar.gz" -C /tmp/sweep "$name"' EXIT
timeout "${LIMIT:-540}" "$BIN" sweep --backend cuda --log2-keys 26 --load 0.6,0.7,0.8,0.9,0.95,0.99 --runs 3 \
  --min-log2-keys 18 --max-log2-keys 24 --probe-log2-keys 22 --success-log2-keys 18 --seeds 50 \
  --out "/tmp/sweep/$name" "$@" 2>&1 | tr '\r' '\n' | grep -v "^\s*$" | tail -60 | tee "/tmp/sweep/$name/log.txt"
