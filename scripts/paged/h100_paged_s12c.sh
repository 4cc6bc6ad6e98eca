# Session 12, call C: routed upserts whose keys are routed while the values are copied, and routed finds
# pipelined in parts of 2^24 keys (every child resident). Paged and host-path tests on CUDA, memcheck and
# racecheck on the routing tests, then the residency rows (interleaved with the plain table) with both
# (default) and with neither (HASHTILE_ROUTE_AFTER_COPY=1 HASHTILE_WHOLE_FINDS=1: the previous design), in
# turn, twice at 16 children, then at 4 and 64 children.
t0=$SECONDS
source scripts/device_lib.sh
step paged_tests 150 env HASHTILE_REQUIRE_GPU=cuda $B/paged --test-threads 4
grep -E "panicked|FAILED|failed" $OUT/paged_tests.txt | head -5
step host_path_tests 100 env HASHTILE_REQUIRE_GPU=cuda $B/host_path
step memcheck_routing 150 compute-sanitizer --tool memcheck env HASHTILE_REQUIRE_GPU=cuda $B/paged device_routing
step memcheck_sentinel 100 compute-sanitizer --tool memcheck env HASHTILE_REQUIRE_GPU=cuda $B/paged sentinel_batches
step racecheck_routing 200 compute-sanitizer --tool racecheck env HASHTILE_REQUIRE_GPU=cuda $B/paged device_routing_agrees
export TAIL=1
for r in 1 2; do
  paged_bench res_c16_new_$r 120 --experiments residency --placements hash --children 16 --runs 7
  HASHTILE_ROUTE_AFTER_COPY=1 HASHTILE_WHOLE_FINDS=1 paged_bench res_c16_old_$r 120 --experiments residency --placements hash --children 16 --runs 7
done
paged_bench res_c4_new 120 --experiments residency --placements hash --children 4 --child-mib 256 --runs 7
paged_bench res_c64_new 150 --experiments residency --placements hash --children 64 --child-mib 16 --runs 7
HASHTILE_ROUTE_AFTER_COPY=1 HASHTILE_WHOLE_FINDS=1 paged_bench res_c64_old 150 --experiments residency --placements hash --children 64 --child-mib 16 --runs 7
echo "total $((SECONDS - t0)) s"
