# Session 13, call C: the final code. `find_into` no longer zeroes its presence bits (every path that uses them
# writes each word first); `hashtile-bench-old` is call B's build, which did. Paged, frames, stress and
# host-path tests on CUDA; memcheck and racecheck on the frames tests (their descriptor layout changed after
# call A); interleaved all-resident rows (new and old in turn at 16 children; the A/B without frames; 64 and 4
# children); growth, confined rebuild and the 16 GiB table under 4 GiB on the final code.
t0=$SECONDS
source scripts/device_lib.sh
old_bench() { # name limit args...
  local name=$1 limit=$2; shift 2
  mkdir -p "$OUT/paged_old"
  timeout "$limit" $B/hashtile-bench-old paged --backend cuda --out-dir "$OUT/paged_old" "$@" > "$OUT/$name.txt" 2>&1
  echo "== $name (exit $?) at $((SECONDS - t0)) s"; grep -v "^wrote" "$OUT/$name.txt" | grep -v "^trace" | tail -"${TAIL:-8}"
}
step paged_tests 150 env HASHTILE_REQUIRE_GPU=cuda $B/paged --test-threads 4
grep -E "panicked|FAILED|failed" $OUT/paged_tests.txt | head -5
step frames_tests 100 env HASHTILE_REQUIRE_GPU=cuda $B/paged_frames
step stress_tests 150 env HASHTILE_REQUIRE_GPU=cuda $B/paged_stress
step host_path_tests 100 env HASHTILE_REQUIRE_GPU=cuda $B/host_path
step memcheck_frames 150 compute-sanitizer --tool memcheck env HASHTILE_REQUIRE_GPU=cuda $B/paged_frames --test-threads 1
step racecheck_frames 200 compute-sanitizer --tool racecheck env HASHTILE_REQUIRE_GPU=cuda $B/paged_frames --test-threads 1
export TAIL=1
for r in 1 2 3; do
  paged_bench res_c16_$r 60 --experiments residency --placements hash --children 16 --runs 7 --all-resident-only
  old_bench res_c16_old_$r 60 --experiments residency --placements hash --children 16 --runs 7 --all-resident-only
done
HASHTILE_NO_FRAMES=1 paged_bench res_c16_no_frames 60 --experiments residency --placements hash --children 16 --runs 7 --all-resident-only
for r in 1 2; do
  paged_bench res_c64_$r 60 --experiments residency --placements hash --children 64 --child-mib 16 --runs 7 --all-resident-only
done
paged_bench res_c4 60 --experiments residency --placements hash --children 4 --child-mib 256 --runs 7 --all-resident-only
export TAIL=2
paged_bench growth_64 60 --experiments growth --child-mib 64 --log2-keys 26 --log2-batch 20
paged_bench rebuild 60 --experiments rebuild --log2-keys 26 --runs 5
paged_bench big16 150 --experiments big --big-gib 16 --big-budget-gib 4
echo "total $((SECONDS - t0)) s"
