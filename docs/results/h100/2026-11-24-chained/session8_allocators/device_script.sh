# Session 8, call I: SlabAlloc's resident blocks vs the hashed bitmap (tiles of 8), bulk + incremental + mixes,
# SlabHash in the same call; the chained tests (resident blocks on CUDA too) under memcheck and racecheck.
t0=$SECONDS
source scripts/device_lib.sh
( cd .device/peers && timeout 200 nvcc -O3 -std=c++17 -arch=sm_90 --expt-extended-lambda \
    --expt-relaxed-constexpr -w -Ivendor/slab/src -Ivendor/slab/src/concurrent_map -Ivendor/slab/SlabAlloc/src \
    slab_bench.cu -o /tmp/slab_bench ) > "$OUT/slab_build.txt" 2>&1
timeout 150 /tmp/slab_bench 24 > "$OUT/slab.csv" 2> "$OUT/slab.err"; echo "== slab_bench (exit $?) at $((SECONDS - t0)) s"
for a in resident hashed; do
timeout 150 $B/hashtile-bench chained --backend cuda --log2-keys 24 --runs 5 --experiments bulk,incremental,mixes --allocator $a \
  --peer-csv "$OUT/slab.csv" --out-dir "$OUT/$a" > "$OUT/$a.txt" 2> "$OUT/$a.err"
echo "== $a (exit $?) at $((SECONDS - t0)) s"; grep -v "^wrote" "$OUT/$a.txt"
done
cd $B
step chained_tests 120 ./chained --test-threads 1
step chained_memcheck 200 compute-sanitizer --tool memcheck --error-exitcode 9 ./chained --test-threads 1
step chained_racecheck 150 compute-sanitizer --tool racecheck --error-exitcode 9 ./chained --test-threads 1
