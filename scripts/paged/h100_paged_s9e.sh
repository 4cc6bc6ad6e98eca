# Session 9, call E: growth after a warm-up (kernels compiled first), children of 64 and 256 MiB; the rebuild
# again with the warm-up. Carry .device (bins.tar.xz from scripts/pack_device.sh).
t0=$SECONDS
source scripts/device_lib.sh
mkdir -p $OUT/paged
for mib in 64 256; do
  timeout 60 $B/hashtile-bench paged --backend cuda --experiments growth --child-mib $mib --log2-keys 26 --log2-batch 20 --out-dir $OUT/paged > $OUT/growth_$mib.txt 2>&1
  echo "== growth $mib exit $?"; grep -v "^wrote" $OUT/growth_$mib.txt | tail -3
done
timeout 40 $B/hashtile-bench paged --backend cuda --experiments rebuild --log2-keys 26 --runs 5 --out-dir $OUT/paged > $OUT/rebuild.txt 2>&1
echo "== rebuild exit $?"; tail -2 $OUT/rebuild.txt
