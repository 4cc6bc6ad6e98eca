# Session 14, call C: the router's phases (HASHTILE_TRACE_ROUTE) and the paged table's (HASHTILE_TRACE) in the
# 16 GiB table's find under 4 GiB (call B: the visit of the children took 290 of 578 ms), and in the residency
# rows at 4 of 16 children resident, prefetching on.
t0=$SECONDS
source scripts/device_lib.sh
export TAIL=2 HASHTILE_TRACE=1 HASHTILE_TRACE_ROUTE=1
paged_bench big16_trace 100 --experiments big --big-gib 16 --big-budget-gib 4
paged_bench res_c16_trace 100 --experiments residency --placements hash --children 16 --runs 1
echo "total $((SECONDS - t0)) s"
