# Session 13, call A: slot frames (every resident child in one allocation; a find with all children resident is
# one framed launch per copy chunk). Paged, frames and host-path tests on CUDA; memcheck and racecheck on the
# frames tests; the all-resident rows interleaved with the plain table, with the A/B HASHTILE_NO_FRAMES=1 (each
# child its own allocation, finds partitioned) at 16 and 64 children; 4 children; the 16 GiB table under 4 GiB
# (children page out of and into frames).
t0=$SECONDS
source scripts/device_lib.sh
step paged_tests 150 env HASHTILE_REQUIRE_GPU=cuda $B/paged --test-threads 4
grep -E "panicked|FAILED|failed" $OUT/paged_tests.txt | head -5
step frames_tests 100 env HASHTILE_REQUIRE_GPU=cuda $B/paged_frames
grep -E "panicked|FAILED|failed" $OUT/frames_tests.txt | head -5
step host_path_tests 100 env HASHTILE_REQUIRE_GPU=cuda $B/host_path
step memcheck_frames 150 compute-sanitizer --tool memcheck env HASHTILE_REQUIRE_GPU=cuda $B/paged_frames --test-threads 1
step racecheck_frames 200 compute-sanitizer --tool racecheck env HASHTILE_REQUIRE_GPU=cuda $B/paged_frames --test-threads 1
export TAIL=1
for r in 1 2 3; do
  paged_bench res_c16_$r 60 --experiments residency --placements hash --children 16 --runs 7 --all-resident-only
  HASHTILE_NO_FRAMES=1 paged_bench res_c16_no_frames_$r 60 --experiments residency --placements hash --children 16 --runs 7 --all-resident-only
done
for r in 1 2; do
  paged_bench res_c64_$r 60 --experiments residency --placements hash --children 64 --child-mib 16 --runs 7 --all-resident-only
done
HASHTILE_NO_FRAMES=1 paged_bench res_c64_no_frames 60 --experiments residency --placements hash --children 64 --child-mib 16 --runs 7 --all-resident-only
paged_bench res_c4 60 --experiments residency --placements hash --children 4 --child-mib 256 --runs 7 --all-resident-only
export TAIL=2
paged_bench big16 150 --experiments big --big-gib 16 --big-budget-gib 4
echo "total $((SECONDS - t0)) s"
