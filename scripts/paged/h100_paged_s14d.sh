# Session 14, call D: the prefetch test (children of 8 MiB on CUDA) and a mutation of it (check_resident no
# longer waits for a child's page-in: `paged_mut`, must fail), memcheck on the test, the 16 GiB table under
# 4 GiB with the find's kernels warmed up (prefetching on, off, on), and all-resident rows at 16 and 64 children.
t0=$SECONDS
source scripts/device_lib.sh
step paged_tests 200 env HASHTILE_REQUIRE_GPU=cuda $B/paged --test-threads 4
grep -E "panicked|FAILED|failed" $OUT/paged_tests.txt | head -5
step mutant_prefetch 150 env HASHTILE_REQUIRE_GPU=cuda $B/paged_mut prefetch
grep -E "panicked" $OUT/mutant_prefetch.txt | head -3
step memcheck_prefetch 150 compute-sanitizer --tool memcheck env HASHTILE_REQUIRE_GPU=cuda $B/paged prefetch
export TAIL=1
paged_bench big16_on_1 100 --experiments big --big-gib 16 --big-budget-gib 4
export HASHTILE_NO_PREFETCH=1
paged_bench big16_off_1 100 --experiments big --big-gib 16 --big-budget-gib 4
unset HASHTILE_NO_PREFETCH
paged_bench big16_on_2 100 --experiments big --big-gib 16 --big-budget-gib 4
paged_bench res_c16 90 --experiments residency --placements hash --children 16 --runs 7 --all-resident-only
paged_bench res_c64 90 --experiments residency --placements hash --children 64 --child-mib 16 --runs 7 --all-resident-only
echo "total $((SECONDS - t0)) s"
