#!/usr/bin/env bash
# Device machine, issue 9: the static schemes at B = 16 (and 1CHT) against BGHT's own, in one call: this tree's
# bench and the previous binary (hashtile-bench-old), each with the duplicate check off (`--no-upsert`, BGHT's
# build) and on, then BGHT and cuCollections built and run by the peers' script. Prints the table rows.
# Carry .device/bins.tar.xz (scripts/pack_device.sh [old bench]) and .device/peers.
# Usage: SCHEMES=iht,p2bht,1cht LOADS=0.8,0.9 bash scripts/h100_static.sh
set -u
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
SCHEMES=${SCHEMES:-iht,p2bht,1cht}; LOADS=${LOADS:-0.8,0.9}
t0=$SECONDS
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem --format=csv,noheader
B=/tmp/bin; mkdir -p $B && tar -xJf .device/bins.tar.xz -C $B
HASHTILE_REQUIRE_GPU=cuda timeout 100 $B/matrix --test-threads 1 cuda > /tmp/matrix.txt 2>&1
echo "== matrix tests (exit $?) at $((SECONDS - t0)) s"; grep -E "test result|FAILED|panicked" /tmp/matrix.txt | head -4
for up in no-upsert upsert; do
  flag=""; [ $up = no-upsert ] && flag="--no-upsert"
  for v in new old; do
    bin=$B/hashtile-bench; [ $v = old ] && bin=$B/hashtile-bench-old
    [ -x "$bin" ] || continue
    # shellcheck disable=SC2086
    timeout 120 $bin --backend cuda --log2-keys 26 --scheme "$SCHEMES" --bucket 16 --load "$LOADS" --runs 3 $flag \
      --csv "$OUT/static_${v}_$up.csv" > /tmp/static_${v}_$up.txt 2>&1
    echo "== $v $up (exit $?) at $((SECONDS - t0)) s"; grep -E "^\| (iht|p2bht|1cht|bcht) " /tmp/static_${v}_$up.txt
  done
done
SLAB=0 timeout 200 bash .device/peers/run.sh 26 "$LOADS" > "$OUT/peers.csv" 2> /tmp/peers_err.txt
echo "== peers (exit $?) at $((SECONDS - t0)) s"; grep -E "^bght,(iht|p2bht|cht|bcht,8)|^cuco,dh,4" "$OUT/peers.csv"
echo "== all done at $((SECONDS - t0)) s"
