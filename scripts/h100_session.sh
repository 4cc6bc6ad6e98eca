#!/usr/bin/env bash
# Device machine, one call (<= 10 min): the CUDA tests (release test binaries carried in .device/), the 2^26
# rates of BCHT at B = 16 and 8 (upsert and the paper's bulk build), the generated CUDA source, and an ncu look at
# the insert kernel (registers, occupancy, memory, stalls). Usage: bash scripts/h100_session.sh
set -u
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}
export PATH=/usr/local/cuda/bin:$PATH
BIN=${BIN:-.device/hashtile-bench}
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,memory.total --format=csv | tee "$OUT/gpu.txt"
# CUDA tests: every result against the oracle; a missing CUDA device is a failure here.
for t in .device/gpu .device/matrix; do
  echo "== $t"
  HASHTILE_REQUIRE_GPU=cuda $t --test-threads 1 cuda 2>&1 | grep -E "^test |result|panicked|SKIPPED|probes cpu" | tee -a "$OUT/tests.txt"
done
# The generated CUDA of the insert and find kernels.
CUBECL_DEBUG_LOG="$OUT/kernels.log" $BIN --backend cuda --log2-keys 12 --runs 1 --load 0.8 --csv /tmp/x.csv > /dev/null 2>&1
for b in 16 8; do
  $BIN --backend cuda --log2-keys 26 --bucket $b --load 0.8,0.9 --runs 5 --csv "$OUT/b$b.csv" 2>&1 | grep -E "^\||check|rror"
  $BIN --backend cuda --log2-keys 26 --bucket $b --load 0.8,0.9 --runs 5 --no-upsert --csv "$OUT/b${b}_noupsert.csv" 2>&1 | grep -E "insert|check|rror"
done
# ncu: one insert kernel at 2^24, B = 16.
timeout 240 ncu --clock-control none -k regex:insert --launch-skip 1 --launch-count 1 \
  --section LaunchStats --section Occupancy --section SpeedOfLight --section MemoryWorkloadAnalysis \
  --section WarpStateStats --section SchedulerStats \
  $BIN --backend cuda --log2-keys 24 --bucket 16 --load 0.8 --runs 1 --csv /tmp/y.csv > "$OUT/ncu_insert.txt" 2>&1
grep -E "Registers Per|Achieved Occupancy|Theoretical Occupancy|Block Limit|DRAM Throughput|Memory Throughput|Duration|Stall|Warp Cycles|Eligible|Issued Warp" "$OUT/ncu_insert.txt" | head -40
