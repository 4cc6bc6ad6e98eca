# Session 12, call D: the landed commit (routed upserts route their keys while the values are copied; finds
# whole). Paged and host-path tests on CUDA, memcheck on the routed-upsert tests, racecheck on the routing
# test, the all-resident rows interleaved with the plain table (16 children twice, 4, 64; the A/B of routing
# after the copy once), then growth, the confined rebuild and the 16 GiB table under 4 GiB (swaps vs pinned).
t0=$SECONDS
source scripts/device_lib.sh
step paged_tests 150 env HASHTILE_REQUIRE_GPU=cuda $B/paged --test-threads 4
grep -E "panicked|FAILED|failed" $OUT/paged_tests.txt | head -5
step host_path_tests 100 env HASHTILE_REQUIRE_GPU=cuda $B/host_path
step memcheck_routed 150 compute-sanitizer --tool memcheck env HASHTILE_REQUIRE_GPU=cuda $B/paged --test-threads 1 device_routing sentinel repeats wide
step racecheck_routing 150 compute-sanitizer --tool racecheck env HASHTILE_REQUIRE_GPU=cuda $B/paged device_routing_agrees
export TAIL=1
for r in 1 2; do
  paged_bench res_c16_$r 120 --experiments residency --placements hash --children 16 --runs 7
done
HASHTILE_ROUTE_AFTER_COPY=1 paged_bench res_c16_after_copy 120 --experiments residency --placements hash --children 16 --runs 7
paged_bench res_c4 120 --experiments residency --placements hash --children 4 --child-mib 256 --runs 7
paged_bench res_c64 150 --experiments residency --placements hash --children 64 --child-mib 16 --runs 7
export TAIL=2
paged_bench growth_64 60 --experiments growth --child-mib 64 --log2-keys 26 --log2-batch 20
paged_bench rebuild 60 --experiments rebuild --log2-keys 26 --runs 5
paged_bench big16 150 --experiments big --big-gib 16 --big-budget-gib 4
echo "total $((SECONDS - t0)) s"
