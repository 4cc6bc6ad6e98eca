# Session 12, call E: where the all-resident find's time goes. Traced runs (HASHTILE_TRACE: host-path and
# paged laps; HASHTILE_TRACE_ROUTE: the router's synced marks), every kernel's duration under ncu (one metric,
# no replay) for one all-resident residency run, and more interleaved samples of the ratio.
t0=$SECONDS
source scripts/device_lib.sh
export TAIL=1
for r in 1 2 3; do
  paged_bench res_c16_$r 60 --experiments residency --placements hash --children 16 --runs 7 --all-resident-only
done
HASHTILE_TRACE=1 HASHTILE_TRACE_ROUTE=1 paged_bench trace_c16 60 --experiments residency --placements hash --children 16 --runs 3 --all-resident-only
grep -E "^trace" $OUT/trace_c16.txt | sort | uniq -c | sort -rn | head -5
timeout 240 ncu --metrics gpu__time_duration.sum --csv --print-units base --cache-control none --clock-control none $B/hashtile-bench paged --backend cuda --out-dir $OUT/paged --experiments residency --placements hash --children 16 --runs 1 --all-resident-only > $OUT/ncu_c16.csv 2> $OUT/ncu_c16.err
echo "== ncu (exit $?) at $((SECONDS - t0)) s: $(wc -l < $OUT/ncu_c16.csv) lines"
gzip -f $OUT/ncu_c16.csv
echo "total $((SECONDS - t0)) s"
