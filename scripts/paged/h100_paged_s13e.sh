# Session 13, call E: tables made larger than their budget get the budget's frames at once (swaps page into
# frames: no device allocation or free per swap). Frames tests on CUDA (memcheck on the new test); the 16 GiB
# table under 4 GiB with this build and with `hashtile-bench-s12` (commit c57f91e) in turn; the 84 GiB table of
# u64 pairs under 56 GiB (larger than the GPU) on this build.
t0=$SECONDS
source scripts/device_lib.sh
s12_bench() { # name limit args...
  local name=$1 limit=$2; shift 2
  mkdir -p "$OUT/paged_s12"
  timeout "$limit" $B/hashtile-bench-s12 paged --backend cuda --out-dir "$OUT/paged_s12" "$@" > "$OUT/$name.txt" 2>&1
  echo "== $name (exit $?) at $((SECONDS - t0)) s"; grep -v "^wrote" "$OUT/$name.txt" | grep -v "^trace" | tail -"${TAIL:-8}"
}
step frames_tests 100 env HASHTILE_REQUIRE_GPU=cuda $B/paged_frames
step memcheck_budget_frames 100 compute-sanitizer --tool memcheck env HASHTILE_REQUIRE_GPU=cuda $B/paged_frames tables_made_past
export TAIL=1
paged_bench big16_1 100 --experiments big --big-gib 16 --big-budget-gib 4
s12_bench big16_s12_1 100 --experiments big --big-gib 16 --big-budget-gib 4
paged_bench big16_2 100 --experiments big --big-gib 16 --big-budget-gib 4
free -g | head -2
timeout 330 $B/hashtile-bench paged --backend cuda --out-dir $OUT/paged --experiments big --big-gib 84 --big-budget-gib 56 --big-keys 64 > $OUT/big84.txt 2>&1
echo "== big84 (exit $?) at $((SECONDS - t0)) s"; grep -v "^wrote" $OUT/big84.txt | tail -4
echo "total $((SECONDS - t0)) s"
