# Session 14, call B: where the 16 GiB table's find under 4 GiB spends its time with prefetching on and off
# (HASHTILE_TRACE: the visit of the children split into page-outs, page-ins queued, the children's work), and
# the residency rows (16 children of 64 MiB, every budget x) with prefetching on and off.
t0=$SECONDS
source scripts/device_lib.sh
export TAIL=1
export HASHTILE_TRACE=1
paged_bench big16_on_trace 100 --experiments big --big-gib 16 --big-budget-gib 4
export HASHTILE_NO_PREFETCH=1
paged_bench big16_off_trace 100 --experiments big --big-gib 16 --big-budget-gib 4
unset HASHTILE_NO_PREFETCH HASHTILE_TRACE
export TAIL=12
mkdir -p $OUT/on $OUT/off
paged_bench res_c16_on 170 --experiments residency --placements hash --children 16 --runs 3
mv $OUT/paged/* $OUT/on/
export HASHTILE_NO_PREFETCH=1
paged_bench res_c16_off 170 --experiments residency --placements hash --children 16 --runs 3
mv $OUT/paged/* $OUT/off/
echo "total $((SECONDS - t0)) s"
