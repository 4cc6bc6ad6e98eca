# Session 14, call E: the 84 GiB table of 64-bit pairs under 56 GiB with prefetching (s13f: 22.1 M keys/s, find
# 0.44 of pinned), and the residency rows at every budget (16 children of 64 MiB; prefetching on).
t0=$SECONDS
source scripts/device_lib.sh
export TAIL=2
paged_bench big84 420 --experiments big --big-gib 84 --big-budget-gib 56 --big-keys 64
export TAIL=8
paged_bench res_c16 120 --experiments residency --placements hash --children 16 --runs 3
echo "total $((SECONDS - t0)) s"
