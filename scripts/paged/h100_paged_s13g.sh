# Session 13, call G: the final commit (page-ins share one upload_image): paged, frames, stress and host-path
# tests on CUDA, memcheck on the frames tests, one 16 GiB table under 4 GiB (children page into frames).
t0=$SECONDS
source scripts/device_lib.sh
step paged_tests 150 env HASHTILE_REQUIRE_GPU=cuda $B/paged --test-threads 4
grep -E "panicked|FAILED|failed" $OUT/paged_tests.txt | head -5
step frames_tests 100 env HASHTILE_REQUIRE_GPU=cuda $B/paged_frames
step stress_tests 150 env HASHTILE_REQUIRE_GPU=cuda $B/paged_stress
step host_path_tests 100 env HASHTILE_REQUIRE_GPU=cuda $B/host_path
step memcheck_frames 150 compute-sanitizer --tool memcheck env HASHTILE_REQUIRE_GPU=cuda $B/paged_frames --test-threads 1
export TAIL=1
paged_bench big16 100 --experiments big --big-gib 16 --big-budget-gib 4
echo "total $((SECONDS - t0)) s"
