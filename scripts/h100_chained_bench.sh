#!/usr/bin/env bash
# Issue 10's speed measurements on the H100, one device call: the original SlabHash (the peers' slab_bench,
# built here with nvcc from .device/peers) and hashtile-bench chained at 2^24 keys (every experiment, with
# BCHT measured in the same run and SlabHash's CSV as --peer-csv).
# Carry [".device"] with .device/peers copied from ../shared/peers.
set -u
R=$PWD
source scripts/device_lib.sh
( cd "$R/.device/peers" && timeout 200 nvcc -O3 -std=c++17 -arch=sm_90 --expt-extended-lambda \
    --expt-relaxed-constexpr -w -Ivendor/slab/src -Ivendor/slab/src/concurrent_map -Ivendor/slab/SlabAlloc/src \
    slab_bench.cu -o /tmp/slab_bench ) > "$OUT/slab_build.txt" 2>&1
echo "== slab_bench built (exit $?) at $((SECONDS - t0)) s"
timeout 150 /tmp/slab_bench 24 > "$OUT/slab.csv" 2> "$OUT/slab.err"; slab=$?
echo "== slab_bench (exit $slab) at $((SECONDS - t0)) s"
cat "$OUT/slab.csv"
# A failed or cut-off slab_bench leaves no CSV or a torn last line, which --peer-csv refuses: run without it.
PEER=(); [ "$slab" -eq 0 ] && [ -s "$OUT/slab.csv" ] && PEER=(--peer-csv "$OUT/slab.csv")
# Issue 10's experiments (bulk, incremental, mixes, alloc, host), SlabHash's results beside ours: one CSV and
# one SVG per experiment in $OUT/chained, the tables on stdout (progress lines in chained.err). The three
# limits add up to more than a device call's 10 minutes; the build and slab_bench take far less than theirs.
timeout 400 $B/hashtile-bench chained --backend cuda --log2-keys 24 --runs ${RUNS:-5} ${PEER[@]+"${PEER[@]}"} \
  --out-dir "$OUT/chained" > "$OUT/chained.txt" 2> "$OUT/chained.err"; echo "== chained (exit $?) at $((SECONDS - t0)) s"
cat "$OUT/chained.txt"
grep -v "^chained: " "$OUT/chained.err" | tail -20
