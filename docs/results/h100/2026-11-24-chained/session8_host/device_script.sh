# Session 8, call G: ChainedTable host calls through the shared stager, against the bus measured in the same run.
t0=$SECONDS
source scripts/device_lib.sh
timeout 250 $B/hashtile-bench chained --backend cuda --log2-keys 24 --runs 5 --experiments host \
  --out-dir "$OUT/chained" > "$OUT/host.txt" 2> "$OUT/host.err"
echo "== host (exit $?) at $((SECONDS - t0)) s"; grep -v "^wrote" "$OUT/host.txt"
