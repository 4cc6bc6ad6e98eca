# Session 13, call F: call E's 84 GiB table panicked inside CubeCL (one frames buffer of 28 GiB: past the
# runtime's largest allocation, a quarter of device memory); frames are now capped at it. Frames tests on CUDA,
# then the 84 GiB table of u64 pairs under 56 GiB (larger than the GPU).
t0=$SECONDS
source scripts/device_lib.sh
step frames_tests 100 env HASHTILE_REQUIRE_GPU=cuda $B/paged_frames
free -g | head -2
timeout 420 $B/hashtile-bench paged --backend cuda --out-dir $OUT/paged --experiments big --big-gib 84 --big-budget-gib 56 --big-keys 64 > $OUT/big84.txt 2>&1
echo "== big84 (exit $?) at $((SECONDS - t0)) s"; grep -v "^wrote" $OUT/big84.txt | tail -4
free -g | head -2
echo "total $((SECONDS - t0)) s"
