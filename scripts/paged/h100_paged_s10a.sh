# Session 10, call A: device routing of hash-routed paged tables. The paged tests on CUDA, then the
# all-resident residency row (vs the plain table, same run), growth at 64 MiB children, and the 16 GiB table
# under a 4 GiB budget. Carry .device (bins.tar.xz from scripts/pack_device.sh).
t0=$SECONDS
source scripts/device_lib.sh
mkdir -p $OUT/paged
step paged_tests 100 env HASHTILE_REQUIRE_GPU=cuda $B/paged --test-threads 4
grep -E "panicked|FAILED|failed" $OUT/paged_tests.txt | head -5
paged_bench residency 150 --experiments residency --placements hash --children 16 --runs 3
HASHTILE_TRACE=1 paged_bench growth_64 60 --experiments growth --child-mib 64 --log2-keys 26 --log2-batch 20
grep "trace paged" $OUT/growth_64.txt | tail -3
paged_bench big16 150 --experiments big --big-gib 16 --big-budget-gib 4
