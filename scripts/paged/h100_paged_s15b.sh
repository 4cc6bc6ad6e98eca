# Session 15, call B: framed upserts measured. The all-resident rows with framed upserts on and off
# (HASHTILE_NO_FRAMED_UPSERT=1) in the same call, and the plain table's rates of this build against the
# previous commit's (hashtile-bench-old; the insert kernel's body moved into insert_core): device-resident
# rates and the host path, in rounds.
t0=$SECONDS
source scripts/device_lib.sh
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem --format=csv,noheader
export TAIL=2
paged_bench res64_on 120 --experiments residency --placements hash --children 64 --child-mib 16 --runs 5 --all-resident-only
export HASHTILE_NO_FRAMED_UPSERT=1
paged_bench res64_off 120 --experiments residency --placements hash --children 64 --child-mib 16 --runs 5 --all-resident-only
unset HASHTILE_NO_FRAMED_UPSERT
paged_bench res16_on 120 --experiments residency --placements hash --children 16 --runs 5 --all-resident-only
for r in 1 2; do
  for v in new old; do
    bin=$B/hashtile-bench; [ $v = old ] && bin=$B/hashtile-bench-old
    bench rates_${v}_r$r $bin --load 0.8 --scheme bcht,iht --bucket 8
    timeout 150 $bin host --backend cuda --log2-keys 26 --runs 3 --load 0.8 --csv "$OUT/host_${v}_r$r.csv" > "$OUT/host_${v}_r$r.txt" 2>&1
    echo "== host $v round $r (exit $?) at $((SECONDS - t0)) s"
    grep -E "^bus|^0\.[0-9]+ +(vec|pinned) +(insert|upsert|find_into)" "$OUT/host_${v}_r$r.txt" | head -8
  done
done
echo "total $((SECONDS - t0)) s"
