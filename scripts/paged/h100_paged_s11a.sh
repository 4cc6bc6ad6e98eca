# Session 11, call A: where the all-resident insert's time goes. Residency rows (hash-routed, every child
# resident) at 4, 16 and 64 children, then traced runs (HASHTILE_TRACE: the paged table's laps, which do not
# wait for the device; then with HASHTILE_TRACE_ROUTE, whose marks do).
t0=$SECONDS
source scripts/device_lib.sh
export TAIL=3
for c in 16 4 64; do
  paged_bench res_c$c 120 --experiments residency --placements hash --children $c --runs 5
done
HASHTILE_TRACE=1 paged_bench trace_c16 100 --experiments residency --placements hash --children 16 --runs 3
grep -E "trace paged" $OUT/trace_c16.txt | tail -8
grep -E "trace (plan|insert)" $OUT/trace_c16.txt | tail -4
HASHTILE_TRACE=1 HASHTILE_TRACE_ROUTE=1 paged_bench trace_route_c16 100 --experiments residency --placements hash --children 16 --runs 2
grep -E "trace (paged|route)" $OUT/trace_route_c16.txt | tail -12
