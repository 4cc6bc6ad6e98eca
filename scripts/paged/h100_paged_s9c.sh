# Session 9, call C: issue 12's experiments at size: residency, skew, big table.
t0=$SECONDS
source scripts/device_lib.sh
run_bench() { # name limit args...
  local name=$1 limit=$2; shift 2
  timeout "$limit" $B/hashtile-bench paged --backend cuda --out-dir "$OUT/paged" "$@" > "$OUT/$name.txt" 2>&1
  echo "== $name (exit $?) at $((SECONDS - t0)) s"; grep -v "^wrote" "$OUT/$name.txt" | tail -14
}
run_bench big16 150 --experiments big --big-gib 16 --big-budget-gib 4
run_bench residency 260 --experiments residency --children 16 --runs 3
run_bench skew 120 --experiments skew --children 16 --runs 3
