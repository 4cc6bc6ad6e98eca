#!/usr/bin/env bash
# Device machine: the issue-3 sweep at 2^26 keys (B = 16: BCHT, IHT, P2BHT, 1CHT; then IHT at B = 32) with the
# bench binary $1, into /tmp/sweep/{b16,iht32}; /tmp/sweep/done marks the end. Runs in the background
# (started by scripts/h100_session.sh); scripts/h100_collect.sh waits for it and packs the results.
set -u
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}
BIN=${1:-.device/hashtile-bench}
mkdir -p /tmp/sweep
COMMON="sweep --backend cuda --log2-keys 26 --load 0.6,0.7,0.8,0.85,0.9,0.95,0.99 --runs 3 \
  --min-log2-keys 18 --max-log2-keys 24 --probe-log2-keys 22 --success-log2-keys 18 --seeds 50"
echo "binary $BIN start $(date +%s)" > /tmp/sweep/status
$BIN $COMMON --scheme bcht,iht,p2bht,1cht --bucket 16 --out /tmp/sweep/b16 > /tmp/sweep/b16.log 2>&1
echo "b16 rc=$? $(date +%s)" >> /tmp/sweep/status
$BIN $COMMON --scheme iht:32 --out /tmp/sweep/iht32 > /tmp/sweep/iht32.log 2>&1
echo "iht32 rc=$? $(date +%s)" >> /tmp/sweep/status
touch /tmp/sweep/done
