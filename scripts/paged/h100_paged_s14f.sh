# Session 14, call F: where the all-resident insert of 64 children of 16 MiB spends its time (HASHTILE_TRACE:
# the paged table's phases and the plain table's host path, interleaved), beside 16 children of 64 MiB.
t0=$SECONDS
source scripts/device_lib.sh
export TAIL=2 HASHTILE_TRACE=1
paged_bench res_c64_trace 90 --experiments residency --placements hash --children 64 --child-mib 16 --runs 3 --all-resident-only
paged_bench res_c16_trace 90 --experiments residency --placements hash --children 16 --runs 3 --all-resident-only
echo "total $((SECONDS - t0)) s"
