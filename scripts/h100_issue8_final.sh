#!/usr/bin/env bash
# Device machine, issue 8's closing measurements in one call: find-kernel registers (new vs old binary), wide
# and packed device-resident rates (new vs old), then the host bench at 2^26 (B = 8 default and B = 16).
# Carry .device/bins.tar.xz with hashtile-bench, hashtile-bench-old, host_path, gpu, matrix.
set -u
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
t0=$SECONDS
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem --format=csv,noheader
B=/tmp/bin; mkdir -p $B && tar -xJf .device/bins.tar.xz -C $B
step() { echo "== $1 (exit $2) at $((SECONDS - t0)) s"; }
for v in new old; do
  bin=$B/hashtile-bench; [ $v = old ] && bin=$B/hashtile-bench-old
  for a in "--wide --scheme iht --bucket 16" "--scheme bcht --bucket 8"; do
    # shellcheck disable=SC2086
    timeout 120 ncu --clock-control none --metrics launch__registers_per_thread --kernel-name regex:"find_kernel|insert_kernel" \
      --csv $bin --backend cuda $a --log2-keys 20 --load 0.8 --runs 1 --csv /tmp/r.csv 2>/dev/null \
      | grep -E "_kernel" | awk -F'","' '{print $5, $NF}' | sort | uniq -c | sed "s/^/regs $v ($a): /"
  done
done
for v in new old; do
  bin=$B/hashtile-bench; [ $v = old ] && bin=$B/hashtile-bench-old
  timeout 80 $bin --backend cuda --wide --scheme iht,p2bht --log2-keys 24 --bucket 16 --load 0.8 --runs 5 \
    --csv "$OUT/wide_$v.csv" > /tmp/wide_$v.txt 2>&1
  step "wide ($v)" $?; grep -E "^\| (iht|p2bht)" /tmp/wide_$v.txt
done
for v in new old; do
  bin=$B/hashtile-bench; [ $v = old ] && bin=$B/hashtile-bench-old
  timeout 110 $bin --backend cuda --log2-keys 26 --bucket 8,16 --load 0.8,0.9 --runs 5 \
    --csv "$OUT/device_$v.csv" > /tmp/device_$v.txt 2>&1
  step "device-resident ($v)" $?; grep -E "^\| bcht" /tmp/device_$v.txt
done
for b in default 16; do
  flag=""; [ $b = 16 ] && flag="--bucket 16"
  # shellcheck disable=SC2086
  timeout 150 $B/hashtile-bench host --backend cuda --log2-keys 26 --load 0.8,0.9 --runs 3 $flag \
    --csv "$OUT/host_b$b.csv" > /tmp/host_b$b.txt 2>&1
  step "host bench B=$b" $?; grep -vE "^host:" /tmp/host_b$b.txt | tail -24
done
echo "== all done at $((SECONDS - t0)) s"
