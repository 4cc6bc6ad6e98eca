# Session 10, call C: device routing pipelined in parts. Paged tests on CUDA, residency (all-resident row vs
# the plain table, same run), a traced run, growth at 64 MiB, the 16 GiB table under 4 GiB, then memcheck
# and racecheck of the paged tests (the routing kernels are new).
t0=$SECONDS
source scripts/device_lib.sh
mkdir -p $OUT/paged $OUT/trace
step paged_tests 100 env HASHTILE_REQUIRE_GPU=cuda $B/paged --test-threads 4
grep -E "panicked|FAILED|failed" $OUT/paged_tests.txt | head -5
paged_bench residency 150 --experiments residency --placements hash --children 16 --runs 5
HASHTILE_TRACE=1 timeout 100 $B/hashtile-bench paged --backend cuda --out-dir $OUT/trace --experiments residency --placements hash --children 16 --runs 2 > $OUT/residency_trace.txt 2>&1
echo "== residency_trace (exit $?) at $((SECONDS - t0)) s"; grep -E "trace paged" $OUT/residency_trace.txt | tail -6
paged_bench growth_64 60 --experiments growth --child-mib 64 --log2-keys 26 --log2-batch 20
paged_bench big16 150 --experiments big --big-gib 16 --big-budget-gib 4
step paged_memcheck 200 env HASHTILE_REQUIRE_GPU=cuda compute-sanitizer --tool memcheck --error-exitcode 9 $B/paged --test-threads 1 device_routing repeats bcht forced
step paged_racecheck 200 env HASHTILE_REQUIRE_GPU=cuda compute-sanitizer --tool racecheck --error-exitcode 9 $B/paged --test-threads 1 device_routing repeats
