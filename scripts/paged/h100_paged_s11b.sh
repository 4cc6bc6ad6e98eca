# Session 11, call B: routed upserts settled by one counters read, pipelined routed finds (parts of 2^24 keys
# whose device work overlaps the next part's copy), and the all-resident rows interleaved with the plain
# table. Tests on CUDA first (paged, host path), memcheck and racecheck on the routing test, then residency
# at 16, 64 and 4 children, then a traced run.
t0=$SECONDS
source scripts/device_lib.sh
step paged_tests 150 env HASHTILE_REQUIRE_GPU=cuda $B/paged --test-threads 4
grep -E "panicked|FAILED|failed" $OUT/paged_tests.txt | head -5
step host_path_tests 100 env HASHTILE_REQUIRE_GPU=cuda $B/host_path
step memcheck_routing 120 compute-sanitizer --tool memcheck env HASHTILE_REQUIRE_GPU=cuda $B/paged device_routing_across_device_batches
step racecheck_routing 120 compute-sanitizer --tool racecheck env HASHTILE_REQUIRE_GPU=cuda $B/paged device_routing_across_device_batches
export TAIL=3
for c in 16 64 4; do
  paged_bench res_c$c 120 --experiments residency --placements hash --children $c --runs 5
done
HASHTILE_TRACE=1 paged_bench trace_c16 100 --experiments residency --placements hash --children 16 --runs 3
grep -E "trace paged" $OUT/trace_c16.txt | tail -6
