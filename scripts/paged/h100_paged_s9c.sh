# Session 9, call C: issue 12's experiments at size: residency, skew, big table.
t0=$SECONDS
source scripts/device_lib.sh
export TAIL=14
paged_bench big16 150 --experiments big --big-gib 16 --big-budget-gib 4
paged_bench residency 260 --experiments residency --children 16 --runs 3
paged_bench skew 120 --experiments skew --children 16 --runs 3
