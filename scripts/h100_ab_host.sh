#!/usr/bin/env bash
# Device machine: an A/B(/C..) of environments of the same `hashtile-bench host` binary (diagnosis switches such
# as HASHTILE_WHOLE_BATCH=1 against the default), in rounds A, B, .., A, B, .. so that drift between runs hits
# every variant. Prints the host bench's rows (rates with the bus ceiling of the same run) per variant.
# Carry .device/bins.tar.xz (scripts/pack_device.sh). Usage:
#   ROUNDS=2 BENCH="--load 0.8,0.9" bash scripts/h100_ab_host.sh "HASHTILE_X=0" "HASHTILE_WHOLE_BATCH=1" ..
set -u
ROUNDS=${ROUNDS:-2}
BENCH=${BENCH:---load 0.8,0.9}
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
t0=$SECONDS
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem --format=csv,noheader
mkdir -p /tmp/bin && tar -xJf .device/bins.tar.xz -C /tmp/bin && BIN=/tmp/bin
HASHTILE_REQUIRE_GPU=cuda timeout 120 $BIN/host_path --test-threads 1 > /tmp/tests_host_path.txt 2>&1
echo "== host_path tests (exit $?) at $((SECONDS - t0)) s"; grep -E "test result|FAILED|panicked" /tmp/tests_host_path.txt | head
for r in $(seq 1 "$ROUNDS"); do
  v=0
  for envs in "$@"; do
    v=$((v + 1))
    # shellcheck disable=SC2086
    env $envs timeout 150 $BIN/hashtile-bench host --backend cuda --log2-keys 26 --runs 3 $BENCH \
      --csv "$OUT/host_v${v}_r$r.csv" > "/tmp/host_v${v}_r$r.txt" 2>&1
    echo "== variant $v ($envs) round $r (exit $?) at $((SECONDS - t0)) s"
    grep -E "^bus|^0\.[0-9]+ +(vec|pinned) +(insert|upsert|find_into)" "/tmp/host_v${v}_r$r.txt" | head -20
  done
done
echo "== all done at $((SECONDS - t0)) s"
