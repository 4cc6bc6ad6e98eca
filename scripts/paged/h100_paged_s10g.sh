# Session 10, call G: after the device sentinel check and bit-free find_into. Paged tests on CUDA, the
# hash-routed residency rows twice (all-resident vs the plain table, same run), a traced insert, memcheck of
# the routing tests.
t0=$SECONDS
source scripts/device_lib.sh
mkdir -p $OUT/paged $OUT/paged2 $OUT/trace
step paged_tests 100 env HASHTILE_REQUIRE_GPU=cuda $B/paged --test-threads 4
grep -E "panicked|FAILED|failed" $OUT/paged_tests.txt | head -5
for r in paged paged2; do
  timeout 120 $B/hashtile-bench paged --backend cuda --out-dir $OUT/$r --experiments residency --placements hash --children 16 --runs 5 > $OUT/residency_$r.txt 2>&1
  echo "== residency $r (exit $?) at $((SECONDS - t0)) s"; tail -3 $OUT/residency_$r.txt
done
HASHTILE_TRACE=1 HASHTILE_TRACE_ROUTE=1 timeout 100 $B/hashtile-bench paged --backend cuda --out-dir $OUT/trace --experiments residency --placements hash --children 16 --runs 2 > $OUT/residency_trace.txt 2>&1
echo "== residency_trace (exit $?) at $((SECONDS - t0)) s"; grep -E "trace (route|paged)" $OUT/residency_trace.txt | tail -16
step paged_memcheck 150 env HASHTILE_REQUIRE_GPU=cuda compute-sanitizer --tool memcheck --error-exitcode 9 $B/paged --test-threads 1 device_routing sentinel tombstone
