# Session 9, call G: after the one-pass partition: traced all-resident insert and find (rebuild experiment),
# residency (hash-routed) and growth at 64 MiB children.
t0=$SECONDS
source scripts/device_lib.sh
mkdir -p $OUT/paged
HASHTILE_TRACE=1 timeout 60 $B/hashtile-bench paged --backend cuda --experiments rebuild --log2-keys 26 --runs 3 --out-dir $OUT/paged > $OUT/rebuild.txt 2> $OUT/rebuild_trace.txt
echo "== rebuild exit $?"; grep "trace paged" $OUT/rebuild_trace.txt | head -4; grep "confined" $OUT/rebuild_trace.txt
timeout 150 $B/hashtile-bench paged --backend cuda --experiments residency --placements hash --children 16 --runs 3 --out-dir $OUT/paged > $OUT/residency.txt 2>&1
echo "== residency exit $?"; grep -v "^wrote" $OUT/residency.txt | tail -7
timeout 60 $B/hashtile-bench paged --backend cuda --experiments growth --child-mib 64 --log2-keys 26 --log2-batch 20 --out-dir $OUT/paged > $OUT/growth_64.txt 2>&1
echo "== growth exit $?"; grep -v "^wrote" $OUT/growth_64.txt | tail -2
