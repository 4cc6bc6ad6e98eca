# Session 12, call F: finds scattered chunk by chunk as the keys land, into parts sized from each child's
# share of the directory (a part that overflows: counted and scattered again). Paged tests on CUDA, memcheck
# and racecheck on the routing and crowding tests, then the all-resident rows interleaved with the plain table
# (16 children three times, with the A/B HASHTILE_COUNT_FIRST=1 between; 4 and 64 children), and the 16 GiB
# table under 4 GiB (paged finds there go by device batches with swaps).
t0=$SECONDS
source scripts/device_lib.sh
step paged_tests 150 env HASHTILE_REQUIRE_GPU=cuda $B/paged --test-threads 4
grep -E "panicked|FAILED|failed" $OUT/paged_tests.txt | head -5
step memcheck_routing 150 compute-sanitizer --tool memcheck env HASHTILE_REQUIRE_GPU=cuda $B/paged --test-threads 1 device_routing finds_whose sentinel
step racecheck_routing 150 compute-sanitizer --tool racecheck env HASHTILE_REQUIRE_GPU=cuda $B/paged device_routing_agrees finds_whose
export TAIL=1
for r in 1 2 3; do
  paged_bench res_c16_$r 60 --experiments residency --placements hash --children 16 --runs 7 --all-resident-only
  HASHTILE_COUNT_FIRST=1 paged_bench res_c16_count_first_$r 60 --experiments residency --placements hash --children 16 --runs 7 --all-resident-only
done
paged_bench res_c4 60 --experiments residency --placements hash --children 4 --child-mib 256 --runs 7 --all-resident-only
paged_bench res_c64 60 --experiments residency --placements hash --children 64 --child-mib 16 --runs 7 --all-resident-only
HASHTILE_COUNT_FIRST=1 paged_bench res_c64_count_first 60 --experiments residency --placements hash --children 64 --child-mib 16 --runs 7 --all-resident-only
export TAIL=2
paged_bench big16 150 --experiments big --big-gib 16 --big-budget-gib 4
echo "total $((SECONDS - t0)) s"
