#!/usr/bin/env bash
# Issue 10's first speed measurement on the H100, one device call: the original SlabHash (the peers'
# slab_bench, built here with nvcc from .device/peers) and hashtile-bench chained at 2^24 keys, with BCHT's
# insert measured by the latter. Carry [".device"] with .device/peers copied from ../shared/peers.
set -u
R=$PWD
source scripts/device_lib.sh
( cd "$R/.device/peers" && timeout 200 nvcc -O3 -std=c++17 -arch=sm_90 --expt-extended-lambda \
    --expt-relaxed-constexpr -w -Ivendor/slab/src -Ivendor/slab/src/concurrent_map -Ivendor/slab/SlabAlloc/src \
    slab_bench.cu -o /tmp/slab_bench ) > "$OUT/slab_build.txt" 2>&1
echo "== slab_bench built (exit $?) at $((SECONDS - t0)) s"
timeout 150 /tmp/slab_bench 24 > "$OUT/slab.csv" 2> "$OUT/slab.err"; echo "== slab_bench (exit $?) at $((SECONDS - t0)) s"
cat "$OUT/slab.csv"
timeout 200 $B/hashtile-bench chained --backend cuda --log2-keys 24 --runs ${RUNS:-5} --csv "$OUT/chained.csv" \
  > "$OUT/chained.txt" 2>&1; echo "== chained (exit $?) at $((SECONDS - t0)) s"
grep -vE "^chained:" "$OUT/chained.txt"
