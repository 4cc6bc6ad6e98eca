# Session 10, call A: device routing of hash-routed paged tables. The paged tests on CUDA, then the
# all-resident residency row (vs the plain table, same run), growth at 64 MiB children, and the 16 GiB table
# under a 4 GiB budget. Carry .device (bins.tar.xz from scripts/pack_device.sh).
t0=$SECONDS
source scripts/device_lib.sh
mkdir -p $OUT/paged
step paged_tests 100 env HASHTILE_REQUIRE_GPU=cuda $B/paged --test-threads 4
grep -E "panicked|FAILED|failed" $OUT/paged_tests.txt | head -5
run_bench() { # name limit args...
  local name=$1 limit=$2; shift 2
  timeout "$limit" $B/hashtile-bench paged --backend cuda --out-dir "$OUT/paged" "$@" > "$OUT/$name.txt" 2>&1
  echo "== $name (exit $?) at $((SECONDS - t0)) s"; grep -v "^wrote" "$OUT/$name.txt" | grep -v "^trace" | tail -8
}
run_bench residency 150 --experiments residency --placements hash --children 16 --runs 3
HASHTILE_TRACE=1 run_bench growth_64 60 --experiments growth --child-mib 64 --log2-keys 26 --log2-batch 20
grep "trace paged" $OUT/growth_64.txt | tail -3
run_bench big16 150 --experiments big --big-gib 16 --big-budget-gib 4
