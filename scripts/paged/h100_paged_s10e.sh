# Session 10, call E: the 84 GiB table of u64 pairs (2048 IHT children) under a 56 GiB budget, with device
# routing; first the hash-routed residency rows.
t0=$SECONDS
source scripts/device_lib.sh
mkdir -p $OUT/paged
# The all-resident row again, hash-routed only (call D's residency run was cut by its limit in the
# arrival-order rows, before its plain-table row).
timeout 120 $B/hashtile-bench paged --backend cuda --out-dir $OUT/paged --experiments residency --placements hash --children 16 --runs 5 > $OUT/residency.txt 2>&1
echo "== residency (exit $?) at $((SECONDS - t0)) s"; tail -7 $OUT/residency.txt
free -g | head -2
timeout 480 $B/hashtile-bench paged --backend cuda --out-dir $OUT/paged --experiments big --big-gib 84 --big-budget-gib 56 --big-keys 64 > $OUT/big84.txt 2>&1
echo "== big84 (exit $?) at $((SECONDS - t0)) s"; grep -v "^wrote" $OUT/big84.txt | tail -12
free -g | head -2
