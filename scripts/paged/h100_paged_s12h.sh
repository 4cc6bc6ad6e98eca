# Session 12, call H: the final commit (a find too small for its children counts first): paged and host-path
# tests on CUDA, memcheck on the crowding and routing tests, two all-resident rows at 16 children.
t0=$SECONDS
source scripts/device_lib.sh
step paged_tests 150 env HASHTILE_REQUIRE_GPU=cuda $B/paged --test-threads 4
grep -E "panicked|FAILED|failed" $OUT/paged_tests.txt | head -5
step host_path_tests 100 env HASHTILE_REQUIRE_GPU=cuda $B/host_path
step memcheck_routing 120 compute-sanitizer --tool memcheck env HASHTILE_REQUIRE_GPU=cuda $B/paged --test-threads 1 finds_whose device_routing_agrees
export TAIL=1
for r in 1 2; do
  paged_bench res_c16_$r 60 --experiments residency --placements hash --children 16 --runs 7 --all-resident-only
done
echo "total $((SECONDS - t0)) s"
