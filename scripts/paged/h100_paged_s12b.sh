# Session 12, call B: upserts in place (each child's classify and insert launches on every values chunk as it
# lands, no partition) beside finds in place. Paged tests on CUDA, memcheck and racecheck on the in-place
# tests, then the residency rows (interleaved with the plain table) in place and partitioned
# (--in-place-children 0), twice at 16 children to see the spread, at 4 and 64 children, and at 16 with copy
# chunks of 2^23 keys (half the launches per key).
t0=$SECONDS
source scripts/device_lib.sh
step paged_tests 150 env HASHTILE_REQUIRE_GPU=cuda $B/paged --test-threads 4
grep -E "panicked|FAILED|failed" $OUT/paged_tests.txt | head -5
step memcheck_in_place 150 compute-sanitizer --tool memcheck env HASHTILE_REQUIRE_GPU=cuda $B/paged in_place
step racecheck_in_place 200 compute-sanitizer --tool racecheck env HASHTILE_REQUIRE_GPU=cuda $B/paged in_place
export TAIL=1
for r in 1 2; do
  paged_bench res_c16_in_$r 120 --experiments residency --placements hash --children 16 --runs 7
  paged_bench res_c16_part_$r 120 --experiments residency --placements hash --children 16 --runs 7 --in-place-children 0
done
HASHTILE_CHUNK_KEYS=8388608 paged_bench res_c16_in_chunk23 120 --experiments residency --placements hash --children 16 --runs 7
paged_bench res_c4_in 120 --experiments residency --placements hash --children 4 --child-mib 256 --runs 7
paged_bench res_c4_part 120 --experiments residency --placements hash --children 4 --child-mib 256 --runs 7 --in-place-children 0
paged_bench res_c64_in 150 --experiments residency --placements hash --children 64 --child-mib 16 --runs 7 --in-place-children 64
paged_bench res_c64_part 150 --experiments residency --placements hash --children 64 --child-mib 16 --runs 7 --in-place-children 0
echo "total $((SECONDS - t0)) s"
