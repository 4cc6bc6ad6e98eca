# Session 10, call B: device routing with settled-together child upserts, the bench's find buffer reused; the
# all-resident residency row again, then a traced run (HASHTILE_TRACE_ROUTE: the router's phases, synced).
t0=$SECONDS
source scripts/device_lib.sh
mkdir -p $OUT/paged
paged_bench residency 150 --experiments residency --placements hash --children 16 --runs 3
mkdir -p $OUT/trace
HASHTILE_TRACE=1 HASHTILE_TRACE_ROUTE=1 timeout 150 $B/hashtile-bench paged --backend cuda --out-dir $OUT/trace --experiments residency --placements hash --children 16 --runs 1 > $OUT/residency_trace.txt 2>&1
echo "== residency_trace (exit $?) at $((SECONDS - t0)) s"
grep -E "trace (route|paged)" $OUT/residency_trace.txt | tail -24
