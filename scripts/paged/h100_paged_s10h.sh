# Session 10, call H: where the all-resident find's time goes. Residency rows (hash-routed) with value-only
# lookups and with presence bits forced (HASHTILE_ROUTE_BITS), then traced runs of each.
t0=$SECONDS
source scripts/device_lib.sh
for v in values bits; do
  mkdir -p $OUT/$v $OUT/trace_$v
  if [ $v = bits ]; then export HASHTILE_ROUTE_BITS=1; fi
  timeout 120 $B/hashtile-bench paged --backend cuda --out-dir $OUT/$v --experiments residency --placements hash --children 16 --runs 5 > $OUT/residency_$v.txt 2>&1
  echo "== residency $v (exit $?) at $((SECONDS - t0)) s"; tail -3 $OUT/residency_$v.txt | head -2
  HASHTILE_TRACE_ROUTE=1 timeout 100 $B/hashtile-bench paged --backend cuda --out-dir $OUT/trace_$v --experiments residency --placements hash --children 16 --runs 2 > $OUT/trace_$v.txt 2>&1
  echo "== trace $v (exit $?)"; grep -E "trace route" $OUT/trace_$v.txt | tail -12
done
