# Session 15, call C: framed upserts again, 7 runs each way (HASHTILE_NO_FRAMED_UPSERT=1 for off) at 64 x 16 MiB,
# off at 16 x 64 MiB (call B measured on), the growth row each way (a growing table's batches go framed while
# every child has room), and the 16 GiB table under 4 GiB (never framed: not every child is resident).
t0=$SECONDS
source scripts/device_lib.sh
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem --format=csv,noheader
export TAIL=1
paged_bench res64_on_7 120 --experiments residency --placements hash --children 64 --child-mib 16 --runs 7 --all-resident-only
export HASHTILE_NO_FRAMED_UPSERT=1
paged_bench res64_off_7 120 --experiments residency --placements hash --children 64 --child-mib 16 --runs 7 --all-resident-only
paged_bench res16_off 120 --experiments residency --placements hash --children 16 --runs 5 --all-resident-only
unset HASHTILE_NO_FRAMED_UPSERT
paged_bench res64_on_7b 120 --experiments residency --placements hash --children 64 --child-mib 16 --runs 7 --all-resident-only
paged_bench growth_on 150 --experiments growth --child-mib 64 --log2-keys 26 --log2-batch 20
export HASHTILE_NO_FRAMED_UPSERT=1
paged_bench growth_off 150 --experiments growth --child-mib 64 --log2-keys 26 --log2-batch 20
unset HASHTILE_NO_FRAMED_UPSERT
export TAIL=2
paged_bench big16 120 --experiments big --big-gib 16 --big-budget-gib 4
echo "total $((SECONDS - t0)) s"
