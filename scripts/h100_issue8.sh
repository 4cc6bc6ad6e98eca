#!/usr/bin/env bash
# Device machine, issue 8 (the host path). One part per device call (each < 10 min), every step with its own
# time limit and its own files under $OUT, so a step cut short loses nothing else.
#   part "device":   CUDA tests (host path, GPU oracle, matrix), then device-resident rates: this tree's bench
#                    against hashtile-bench-old (the previous commit's binary: the A/B of a kernel change), packed
#                    (B = 8, 16) and wide (IHT, P2BHT at 2^24), and the peers (BGHT, cuCollections) built in the
#                    same call.
#   part "host":     `hashtile-bench host` at 2^26 keys (loads 0.8 and 0.9; B = 8, the CUDA default, and B = 16),
#                    each against the bus measured in the same run, and one traced run.
#   part "sanitize": compute-sanitizer memcheck, racecheck and synccheck over the kernel tests.
# Carry .device/ holding bins.tar.xz (stripped: hashtile-bench, hashtile-bench-old, host_path, gpu, matrix) and
# peers/ (copied from ../shared/peers).
# Usage: bash scripts/h100_issue8.sh device|host|sanitize
set -u
part=$1
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
t0=$SECONDS
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,memory.total --format=csv,noheader | tee "$OUT/gpu_$part.txt"
mkdir -p /tmp/bin && tar -xJf .device/bins.tar.xz -C /tmp/bin && B=/tmp/bin
step() { echo "== $1 done (exit $2) at $((SECONDS - t0)) s"; }
if [ "$part" = device ]; then
  for t in host_path gpu matrix; do
    filter=""; [ $t = matrix ] && filter=cuda
    HASHTILE_REQUIRE_GPU=cuda timeout 120 $B/$t --test-threads 1 $filter > "$OUT/tests_$t.txt" 2>&1
    step "tests $t" $?; grep -E "test result|FAILED|panicked" "$OUT/tests_$t.txt" | head -6
  done
  for v in new old; do
    bin=$B/hashtile-bench; [ $v = old ] && bin=$B/hashtile-bench-old
    timeout 110 $bin --backend cuda --log2-keys 26 --bucket 8,16 --load 0.8,0.9 --runs 5 \
      --csv "$OUT/device_$v.csv" > "$OUT/device_$v.txt" 2>&1
    step "device-resident rates ($v)" $?; grep -E "^\|" "$OUT/device_$v.txt" | head -30
  done
  for v in new old; do
    bin=$B/hashtile-bench; [ $v = old ] && bin=$B/hashtile-bench-old
    timeout 80 $bin --backend cuda --wide --scheme iht,p2bht --log2-keys 24 --bucket 16 --load 0.8 --runs 5 \
      --csv "$OUT/wide_$v.csv" > "$OUT/wide_$v.txt" 2>&1
    step "wide device-resident rates ($v)" $?; grep -E "^\|" "$OUT/wide_$v.txt" | head -20
  done
  SLAB=0 timeout 200 bash .device/peers/run.sh 26 0.8,0.9 > "$OUT/peers.csv" 2> "$OUT/peers_err.txt"
  step "peers" $?; grep -E "^bght,bcht|^cuco" "$OUT/peers.csv" | head -20
elif [ "$part" = host ]; then
  for b in default 16; do
    flag=""; [ $b = 16 ] && flag="--bucket 16"
    timeout 170 $B/hashtile-bench host --backend cuda --log2-keys 26 --load 0.8,0.9 --runs 3 $flag \
      --csv "$OUT/host_b$b.csv" > "$OUT/host_b$b.txt" 2>&1
    step "host bench B=$b" $?; grep -vE "^host:" "$OUT/host_b$b.txt" | tail -26
  done
  # Where the time goes (each phase waits for the device, so the overlap is lost here): one load, one run.
  HASHTILE_TRACE=1 timeout 60 $B/hashtile-bench host --backend cuda --log2-keys 26 --load 0.8 --runs 1 \
    --csv "$OUT/host_trace.csv" > "$OUT/host_trace.txt" 2>&1
  step "traced host bench" $?; grep -E "^trace|^host: (vec|pinned)" "$OUT/host_trace.txt" | head -60
else
  OUT=$OUT/sanitize SAN_TIMEOUT=${SAN_TIMEOUT:-100} timeout 560 bash scripts/sanitize.sh $B \
    > "$OUT/sanitize.txt" 2>&1
  step "sanitizers" $?; cat "$OUT/sanitize.txt"
  (cd "$OUT" && tar czf sanitize.tar.gz sanitize && rm -rf sanitize)
fi
echo "== all done at $((SECONDS - t0)) s"
