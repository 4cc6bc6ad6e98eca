# Session 13, call D: the 16 GiB table's find under a 4 GiB budget ran at 0.57 / 0.47 of pinned in calls A and
# C against 0.79-0.80 in the twelfth session. Same call, in turn: this build and `hashtile-bench-s12` (commit
# c57f91e, the twelfth session's last), twice each.
t0=$SECONDS
source scripts/device_lib.sh
s12_bench() { # name limit args...
  local name=$1 limit=$2; shift 2
  mkdir -p "$OUT/paged_s12"
  timeout "$limit" $B/hashtile-bench-s12 paged --backend cuda --out-dir "$OUT/paged_s12" "$@" > "$OUT/$name.txt" 2>&1
  echo "== $name (exit $?) at $((SECONDS - t0)) s"; grep -v "^wrote" "$OUT/$name.txt" | grep -v "^trace" | tail -"${TAIL:-8}"
}
export TAIL=1
for r in 1 2; do
  paged_bench big16_$r 150 --experiments big --big-gib 16 --big-budget-gib 4
  s12_bench big16_s12_$r 150 --experiments big --big-gib 16 --big-budget-gib 4
done
echo "total $((SECONDS - t0)) s"
