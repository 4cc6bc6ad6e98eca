# Session 8, call J: find_all with the device scan (one key upload), host experiment against the bus; tests.
t0=$SECONDS
source scripts/device_lib.sh
timeout 250 $B/hashtile-bench chained --backend cuda --log2-keys 24 --runs 5 --experiments host \
  --out-dir "$OUT/chained" > "$OUT/host.txt" 2> "$OUT/host.err"
echo "== host (exit $?) at $((SECONDS - t0)) s"; grep -v "^wrote" "$OUT/host.txt"
cd $B
step chained_tests 120 ./chained --test-threads 1
step chained_memcheck 200 compute-sanitizer --tool memcheck --error-exitcode 9 ./chained --test-threads 1
