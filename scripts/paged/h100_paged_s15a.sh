# Session 15, call A: framed upserts (every child resident: one classify and one insert launch per copy chunk
# over the slot frames). CUDA tests (frames, paged, host-path, gpu), memcheck and racecheck on the framed
# upsert tests.
t0=$SECONDS
source scripts/device_lib.sh
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem --format=csv,noheader
step frames_tests 150 env HASHTILE_REQUIRE_GPU=cuda $B/paged_frames
step paged_tests 200 env HASHTILE_REQUIRE_GPU=cuda $B/paged --test-threads 4
step host_path_tests 120 env HASHTILE_REQUIRE_GPU=cuda $B/host_path
step gpu_tests 120 env HASHTILE_REQUIRE_GPU=cuda $B/gpu
grep -hE "panicked|FAILED" $OUT/*_tests.txt | head -5
step memcheck_framed 200 compute-sanitizer --tool memcheck env HASHTILE_REQUIRE_GPU=cuda $B/paged_frames framed
step racecheck_framed 300 compute-sanitizer --tool racecheck env HASHTILE_REQUIRE_GPU=cuda $B/paged_frames framed
echo "total $((SECONDS - t0)) s"
