# Session 8, call A: incremental batches after the occupancy bound (SlabHash in the same call), the chained
# tests on CUDA, then ncu of the build kernels (ours in INSERT mode, SlabHash's build_table_kernel) at 2^22.
t0=$SECONDS
source scripts/device_lib.sh
( cd .device/peers && timeout 200 nvcc -O3 -std=c++17 -arch=sm_90 --expt-extended-lambda \
    --expt-relaxed-constexpr -w -Ivendor/slab/src -Ivendor/slab/src/concurrent_map -Ivendor/slab/SlabAlloc/src \
    slab_bench.cu -o /tmp/slab_bench -Xptxas -v ) > "$OUT/slab_build.txt" 2>&1
echo "== slab_bench built (exit $?) at $((SECONDS - t0)) s"
grep -A1 "build_table\|search_table" "$OUT/slab_build.txt" | grep -i "registers" | head -4
timeout 150 /tmp/slab_bench 24 > "$OUT/slab.csv" 2> "$OUT/slab.err"; echo "== slab_bench (exit $?) at $((SECONDS - t0)) s"
cat "$OUT/slab.csv"
timeout 200 $B/hashtile-bench chained --backend cuda --log2-keys 24 --runs 5 --experiments incremental,bulk \
  --peer-csv "$OUT/slab.csv" --out-dir "$OUT/chained" > "$OUT/chained.txt" 2> "$OUT/chained.err"
echo "== chained (exit $?) at $((SECONDS - t0)) s"; cat "$OUT/chained.txt"
cd $B
step chained_tests 90 ./chained --test-threads 1
cd - >/dev/null
SECS="--section SpeedOfLight --section LaunchStats --section Occupancy --section WarpStateStats --section SchedulerStats --section MemoryWorkloadAnalysis"
timeout 150 ncu --clock-control none -k regex:chained_kernel --launch-count 3 $SECS \
  $B/hashtile-bench chained --backend cuda --log2-keys 22 --runs 1 --experiments bulk --loads 0.6 --out-dir /tmp/ncu_o \
  > "$OUT/ncu_ours.txt" 2>&1; echo "== ncu ours (exit $?) at $((SECONDS - t0)) s"
timeout 150 ncu --clock-control none -k regex:build_table --launch-count 2 $SECS /tmp/slab_bench 22 \
  > "$OUT/ncu_slab.txt" 2>&1; echo "== ncu slab (exit $?) at $((SECONDS - t0)) s"
for f in ncu_ours ncu_slab; do echo "## $f"; grep -E "^  [a-z_]+.*\(|Registers Per|Achieved Occupancy|Theoretical Occupancy|Duration|Memory Throughput|DRAM Through|Compute \(SM\)|Warp Cycles Per Issued|Block Limit|Issued Ipc|L2 Hit|L1/TEX Hit|Eligible Warps|No Eligible" "$OUT/$f.txt" | head -80; done
