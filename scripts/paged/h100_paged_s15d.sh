# Session 15, call D: the final commit. Every GPU test binary on CUDA, memcheck and racecheck on the frames
# tests (framed finds and upserts, stashes, tombstones, paging through frames), memcheck on the paged tests'
# prefetch test, and the 64 x 16 MiB all-resident row once more.
t0=$SECONDS
source scripts/device_lib.sh
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem --format=csv,noheader
step host_path_tests 120 env HASHTILE_REQUIRE_GPU=cuda $B/host_path
step gpu_tests 120 env HASHTILE_REQUIRE_GPU=cuda $B/gpu
step csr_tests 120 env HASHTILE_REQUIRE_GPU=cuda $B/csr
step chained_tests 150 env HASHTILE_REQUIRE_GPU=cuda $B/chained
step paged_tests 200 env HASHTILE_REQUIRE_GPU=cuda $B/paged --test-threads 4
step frames_tests 150 env HASHTILE_REQUIRE_GPU=cuda $B/paged_frames
step stress_tests 150 env HASHTILE_REQUIRE_GPU=cuda $B/paged_stress
grep -hE "panicked|FAILED" $OUT/*_tests.txt | head -5
step memcheck_frames 200 compute-sanitizer --tool memcheck env HASHTILE_REQUIRE_GPU=cuda $B/paged_frames
step racecheck_frames 300 compute-sanitizer --tool racecheck env HASHTILE_REQUIRE_GPU=cuda $B/paged_frames
export TAIL=1
paged_bench res64_on 120 --experiments residency --placements hash --children 64 --child-mib 16 --runs 7 --all-resident-only
echo "total $((SECONDS - t0)) s"
