# Session 12, call G: the table larger than the GPU on the final commit: 84 GiB of u64 pairs (2048 IHT children)
# under a 56 GiB budget, device-routed (upserts routed during their copy, finds scattered chunk by chunk).
t0=$SECONDS
source scripts/device_lib.sh
mkdir -p $OUT/paged
free -g | head -2
timeout 500 $B/hashtile-bench paged --backend cuda --out-dir $OUT/paged --experiments big --big-gib 84 --big-budget-gib 56 --big-keys 64 > $OUT/big84.txt 2>&1
echo "== big84 (exit $?) at $((SECONDS - t0)) s"; grep -v "^wrote" $OUT/big84.txt | tail -6
free -g | head -2
