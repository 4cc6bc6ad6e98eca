# Session 15, call E: after the re-read (host-side bookkeeping only): frames, paged and stress tests on CUDA,
# memcheck on the frames tests.
t0=$SECONDS
source scripts/device_lib.sh
step frames_tests 150 env HASHTILE_REQUIRE_GPU=cuda $B/paged_frames
step paged_tests 200 env HASHTILE_REQUIRE_GPU=cuda $B/paged --test-threads 4
step stress_tests 150 env HASHTILE_REQUIRE_GPU=cuda $B/paged_stress
grep -hE "panicked|FAILED" $OUT/*_tests.txt | head -5
step memcheck_frames 200 compute-sanitizer --tool memcheck env HASHTILE_REQUIRE_GPU=cuda $B/paged_frames
echo "total $((SECONDS - t0)) s"
