#!/usr/bin/env bash
# Device machine, one call (< 10 min): everything issue 3 needs from the H100, each step with its own time limit
# and its own files under $OUT, so a step cut short loses nothing else:
#   1. the 2^26 sweep of BCHT, IHT, P2BHT (B = 16) and 1CHT (scripts/h100_sweep.sh; checkpointed outputs),
#   2. the CUDA tests: every scheme x bucket size x key/value width of the matrix against the oracle (the
#      wide-pair instances' first CUDA run), the exchange path, device probe counters vs the CPU model,
#   3. the sweep of IHT with B = 32 (the paper's recommended stable configuration),
#   4. wide-pair (u64 key, u64 value) rates of the stable schemes.
# Carry .device/ with the stripped release binaries: hashtile-bench, gpu and matrix (test binaries).
# Usage: bash scripts/h100_issue3.sh
set -u
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
t0=$SECONDS
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,memory.total --format=csv,noheader | tee "$OUT/gpu.txt"
LIMIT=${LIMIT_B16:-300} bash scripts/h100_sweep.sh b16 --scheme bcht,iht,p2bht,1cht --bucket 16
echo "== b16 sweep done at $((SECONDS - t0)) s"
for t in gpu matrix; do
  HASHTILE_REQUIRE_GPU=cuda timeout 60 .device/$t --test-threads 1 cuda > "$OUT/tests_$t.txt" 2>&1
  echo "== $t tests: exit $? at $((SECONDS - t0)) s"; grep -E "test result|FAILED|panicked" "$OUT/tests_$t.txt" | head -8
done
LIMIT=${LIMIT_IHT32:-100} bash scripts/h100_sweep.sh iht32 --scheme iht:32
echo "== iht32 sweep done at $((SECONDS - t0)) s"
timeout 40 .device/hashtile-bench --backend cuda --wide --log2-keys 24 --scheme iht,p2bht --bucket 16 --load 0.8 \
  --runs 3 --csv "$OUT/wide_2p24.csv" 2>&1 | grep -E "^\| (iht|p2bht)|rror"
echo "== all done at $((SECONDS - t0)) s"
