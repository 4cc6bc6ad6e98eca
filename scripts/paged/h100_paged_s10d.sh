# Session 10, call D: the landed device routing (one part per device batch, children settled together).
# Paged tests, residency (all-resident row vs the plain table, same run; and the host-routing A/B), skew,
# rebuild, growth at 64 MiB, the 16 GiB table under 4 GiB, sanitizers (call E: the 84 GiB u64 table).
t0=$SECONDS
source scripts/device_lib.sh
mkdir -p $OUT/paged $OUT/host_routing
step paged_tests 100 env HASHTILE_REQUIRE_GPU=cuda $B/paged --test-threads 4
grep -E "panicked|FAILED|failed" $OUT/paged_tests.txt | head -5
paged_bench residency 150 --experiments residency --children 16 --runs 5
timeout 150 $B/hashtile-bench paged --backend cuda --out-dir $OUT/host_routing --experiments residency --placements hash --children 16 --runs 5 --host-routing > $OUT/residency_host_routing.txt 2>&1
echo "== residency host routing (exit $?)"; tail -3 $OUT/residency_host_routing.txt
paged_bench skew 100 --experiments skew --children 16 --runs 3
paged_bench rebuild 60 --experiments rebuild --log2-keys 26 --runs 5
paged_bench growth_64 60 --experiments growth --child-mib 64 --log2-keys 26 --log2-batch 20
paged_bench big16 150 --experiments big --big-gib 16 --big-budget-gib 4
step paged_memcheck 200 env HASHTILE_REQUIRE_GPU=cuda compute-sanitizer --tool memcheck --error-exitcode 9 $B/paged --test-threads 1
step paged_racecheck 150 env HASHTILE_REQUIRE_GPU=cuda compute-sanitizer --tool racecheck --error-exitcode 9 $B/paged --test-threads 1 device_routing repeats bcht
