# Session 13, call B: where the framed find's remaining time goes, and the A/B of its descriptor reads (this
# build: three words per probe, `hashtile-bench-old`: nine, call A's). Interleaved all-resident rows (new and
# old in turn at 16 children; new at 64 and 4), a traced run, and every kernel's duration under ncu for one
# all-resident run at 16 children.
t0=$SECONDS
source scripts/device_lib.sh
old_bench() { # name limit args...
  local name=$1 limit=$2; shift 2
  mkdir -p "$OUT/paged_old"
  timeout "$limit" $B/hashtile-bench-old paged --backend cuda --out-dir "$OUT/paged_old" "$@" > "$OUT/$name.txt" 2>&1
  echo "== $name (exit $?) at $((SECONDS - t0)) s"; grep -v "^wrote" "$OUT/$name.txt" | grep -v "^trace" | tail -"${TAIL:-8}"
}
step frames_tests 100 env HASHTILE_REQUIRE_GPU=cuda $B/paged_frames
export TAIL=1
for r in 1 2 3; do
  paged_bench res_c16_$r 60 --experiments residency --placements hash --children 16 --runs 7 --all-resident-only
  old_bench res_c16_old_$r 60 --experiments residency --placements hash --children 16 --runs 7 --all-resident-only
done
for r in 1 2; do
  paged_bench res_c64_$r 60 --experiments residency --placements hash --children 64 --child-mib 16 --runs 7 --all-resident-only
done
paged_bench res_c4 60 --experiments residency --placements hash --children 4 --child-mib 256 --runs 7 --all-resident-only
HASHTILE_TRACE=1 HASHTILE_TRACE_ROUTE=1 paged_bench trace_c16 60 --experiments residency --placements hash --children 16 --runs 3 --all-resident-only
grep -E "^trace" $OUT/trace_c16.txt | sort | uniq -c | sort -rn | head -8
timeout 240 ncu --metrics gpu__time_duration.sum --csv --print-units base --cache-control none --clock-control none $B/hashtile-bench paged --backend cuda --out-dir $OUT/paged --experiments residency --placements hash --children 16 --runs 1 --all-resident-only > $OUT/ncu_c16.csv 2> $OUT/ncu_c16.err
echo "== ncu (exit $?) at $((SECONDS - t0)) s: $(wc -l < $OUT/ncu_c16.csv) lines"
gzip -f $OUT/ncu_c16.csv
echo "total $((SECONDS - t0)) s"
