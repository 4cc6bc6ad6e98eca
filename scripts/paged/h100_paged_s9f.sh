# Session 9, call F: a paged table larger than the GPU: 84 GiB of 64-bit pairs (IHT children) under a 56 GiB budget.
t0=$SECONDS
source scripts/device_lib.sh
mkdir -p $OUT/paged
free -g | head -2; nvidia-smi --query-gpu=memory.total,memory.used --format=csv
timeout 570 $B/hashtile-bench paged --backend cuda --experiments big --big-gib 84 --big-budget-gib 56 --big-keys 64 --out-dir $OUT/paged > $OUT/big84.txt 2>&1
echo "== big84 exit $?"; grep -v "^wrote" $OUT/big84.txt | tail -12
free -g | head -2
