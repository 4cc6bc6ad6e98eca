#!/usr/bin/env bash
# Device machine: waits (up to $1 seconds, default 560) for the background sweep of scripts/h100_sweep.sh, then
# packs what it has written into $OUT/sweep.tar.gz (also when it is not done: partial results come back).
set -u
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
for _ in $(seq 1 "${1:-560}"); do [ -f /tmp/sweep/done ] && break; sleep 1; done
cat /tmp/sweep/status 2>/dev/null
for f in /tmp/sweep/*.log; do echo "== $f"; tail -c 300 "$f" | tr '\r' '\n' | tail -3; done
[ -d /tmp/sweep ] && tar czf "$OUT/sweep.tar.gz" -C /tmp sweep
