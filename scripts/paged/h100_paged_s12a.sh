# Session 12, call A: finds looked up in place (every child resident: each child's launch on every copy chunk,
# no partition). Paged and host-path tests on CUDA, memcheck and racecheck on the in-place test, then the
# residency rows (interleaved with the plain table) at 16 children with in-place finds and with partitions
# (--in-place-children 0), and at 64 and 4 children, 64 both ways.
t0=$SECONDS
source scripts/device_lib.sh
step paged_tests 150 env HASHTILE_REQUIRE_GPU=cuda $B/paged --test-threads 4
grep -E "panicked|FAILED|failed" $OUT/paged_tests.txt | head -5
step memcheck_in_place 150 compute-sanitizer --tool memcheck env HASHTILE_REQUIRE_GPU=cuda $B/paged finds_in_place
step racecheck_in_place 150 compute-sanitizer --tool racecheck env HASHTILE_REQUIRE_GPU=cuda $B/paged finds_in_place
export TAIL=3
paged_bench res_c16 120 --experiments residency --placements hash --children 16 --runs 5
paged_bench res_c16_part 120 --experiments residency --placements hash --children 16 --runs 5 --in-place-children 0
paged_bench res_c64_in 150 --experiments residency --placements hash --children 64 --child-mib 16 --runs 5 --in-place-children 64
paged_bench res_c64_part 150 --experiments residency --placements hash --children 64 --child-mib 16 --runs 5
paged_bench res_c4 120 --experiments residency --placements hash --children 4 --child-mib 256 --runs 5
echo "total $((SECONDS - t0)) s"
