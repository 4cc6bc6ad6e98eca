# Session 8, call E: tiles of 8 lanes vs 16 for the chained kernels (bulk + incremental), SlabHash in the same
# call; the chained tests (now also with tiles of 8 on CUDA).
t0=$SECONDS
source scripts/device_lib.sh
( cd .device/peers && timeout 200 nvcc -O3 -std=c++17 -arch=sm_90 --expt-extended-lambda \
    --expt-relaxed-constexpr -w -Ivendor/slab/src -Ivendor/slab/src/concurrent_map -Ivendor/slab/SlabAlloc/src \
    slab_bench.cu -o /tmp/slab_bench ) > "$OUT/slab_build.txt" 2>&1
timeout 150 /tmp/slab_bench 24 > "$OUT/slab.csv" 2> "$OUT/slab.err"; echo "== slab_bench (exit $?) at $((SECONDS - t0)) s"
for w in 8 16; do
timeout 150 $B/hashtile-bench chained --backend cuda --log2-keys 24 --runs 5 --experiments bulk,incremental,mixes --tile-width $w \
  --peer-csv "$OUT/slab.csv" --out-dir "$OUT/tw$w" > "$OUT/tw$w.txt" 2> "$OUT/tw$w.err"
echo "== tile $w (exit $?) at $((SECONDS - t0)) s"; grep -v "^wrote" "$OUT/tw$w.txt"
done
cd $B
step chained_tests 90 ./chained --test-threads 1
cd - >/dev/null
timeout 100 ncu --clock-control none -k regex:chained_kernel --launch-count 1 --section LaunchStats --section InstructionStats --section SpeedOfLight --section Occupancy \
  $B/hashtile-bench chained --backend cuda --log2-keys 22 --runs 1 --experiments bulk --loads 0.6 --tile-width 8 --out-dir /tmp/o \
  > "$OUT/ncu.txt" 2>&1; echo "== ncu (exit $?) at $((SECONDS - t0)) s"
grep -E "^  [a-z_]+.*\(|Registers Per|Executed Instructions  |Duration|Compute \(SM\)|Achieved Occupancy" "$OUT/ncu.txt"
