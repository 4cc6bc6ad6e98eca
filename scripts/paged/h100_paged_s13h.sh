# Session 13, call H: after the re-read (the framed find now runs through the host path's own find): paged,
# frames and host-path tests on CUDA, memcheck on the frames tests, two all-resident rows at 16 children.
t0=$SECONDS
source scripts/device_lib.sh
step paged_tests 150 env HASHTILE_REQUIRE_GPU=cuda $B/paged --test-threads 4
step frames_tests 100 env HASHTILE_REQUIRE_GPU=cuda $B/paged_frames
step host_path_tests 100 env HASHTILE_REQUIRE_GPU=cuda $B/host_path
step memcheck_frames 150 compute-sanitizer --tool memcheck env HASHTILE_REQUIRE_GPU=cuda $B/paged_frames --test-threads 1
export TAIL=1
for r in 1 2; do
  paged_bench res_c16_$r 60 --experiments residency --placements hash --children 16 --runs 7 --all-resident-only
done
echo "total $((SECONDS - t0)) s"
