#!/usr/bin/env bash
# The device runner: named suites, run in the order given, in one device call.
#
#   bash scripts/device.sh SUITE...        (on the GPU machine, from the repository root)
#
# Before the call, here: build (`cargo build --release --workspace --all-targets`), then
# `bash scripts/pack.sh` (-> .device/bins.tar.xz; every test binary packed is past a call's 64 MiB, so a call
# carries a part: `bash scripts/pack.sh --as tests-a --tests "matrix gpu ..."`, run with BINS=.device/tests-a.tar.xz;
# the test binaries a part leaves out are skipped with a note); for `peers`, `ceiling` and `bench-chained` also
# `cp -r ../shared/peers .device/peers`; for `ab` also a baseline set (`bash scripts/pack.sh --as base ...`,
# -> .device/base.tar.xz); for `vulkan` the loader packages in .gl/ (docs/PERFORMANCE.md, "Vulkan").
# Carry [".device"] (and ".gl" for `vulkan`).
#
# Suites (each writes under $OUT/<suite>/; every step has its own time limit, so a step cut short loses
# nothing else):
#   tests          every GPU test binary on CUDA (HASHTILE_REQUIRE_GPU=cuda: a missing device fails)
#   sanitize       compute-sanitizer memcheck and racecheck over small filters of every GPU test binary
#   bench-static   device-resident rates at 2^26 keys: BCHT / IHT / P2BHT at B = 16, 1CHT, BCHT B = 8 (upsert,
#                  bulk build, and the binned build: --binning 128); wide pairs at 2^24
#   bench-host     the user-facing calls on host data at 2^26 keys against the bus of the same run
#   bench-families the chained and CSR tables' host calls against the static table's at 2^24 keys, one run
#                  (issue 29's acceptance 8: one host-I/O speed)
#   bench-chained  the original SlabHash (slab_bench) and `hashtile-bench chained` at 2^24 keys, same call
#   bench-csr      `hashtile-bench csr` at 2^25 keys over duplicates and hash ranges, and the device scan
#   bench-paged    paged tables: all resident (64 x 16 MiB, 16 x 64 MiB), 16 GiB under 4 GiB, rebuild, growth
#   bench-paged-big  the 84 GiB table under a 56 GiB budget (an 80 GB GPU and ~125 GiB of host memory), and the
#                  rates of 16 children at 4 / 8 / 12 / 16 resident
#   bench-sweep    the BGHT paper's experiments at 2^26 keys (rates vs load and N, probes, build success), ~400 s
#   bench-open     linear probing (B = 1, 4) and double hashing (B = 4, 8) device-resident rates at 2^26 keys,
#                  with counting tables (insert-or-apply, `count16`; also BCHT B = 8) and device erases
#                  (`erase`, `find after erase`), to set beside cuCollections' same schemes, `count_16`,
#                  `erase` and `find_after_erase` of `peers` in the same call; sets (4-byte slots, B = 8 and
#                  16) beside its `static_set` rows; inserts and erases in table order (the default) against
#                  the callers' order (`--range-order off,auto`: linear B = 1, 1CHT, BCHT B = 8)
#   bench-life     growth (2^20 to 2^26 keys in 2^20 batches, against one build) and aging (20 rounds of
#                  erasing half and inserting as many at load 0.85) and a mixed batch (HashTable::apply)
#                  through HashTable with host data; growth and 2^20-key host calls with each batch copied in
#                  1 and 4 chunks (`--copy-chunks`), two alternating rounds
#   first-call     a fresh process's first insert and find of 2^20 keys: cold, then from the kernel cache
#   bench-sharded  a sharded table over 1, 2, 4 GPUs (as many as the machine has) against one GPU's table, 2^26
#                  keys per GPU at load 0.8: device slices (insert_device / find_device over NCCL at exchange steps
#                  of 2^25, 2^26 and 2^24 keys, with NCCL's all-to-all of the same bytes) and host data (insert /
#                  find_into / find from Vecs); and one process per GPU (`--ranks`: device slices, insert and
#                  find_into); and the chained multimap and the CSR table over shards (`--family chained|csr`,
#                  host data, 2^24 keys per GPU)
#   peers          BGHT, cuCollections and SlabHash built from .device/peers and run at 2^26 (SlabHash 2^24)
#   ceiling        the GPU's physical ceilings (copies, random bucket reads, compare-and-swap)
#   profile        ncu (`--set full`) of one launch of a row's kernel at 2^26 keys, load 0.8: hashtile's erases
#                  (BCHT B = 8, double hashing B = 4, linear probing B = 1) and linear probing B = 1's insert, and
#                  cuCollections' LP CG 1 erase and insert (built from .device/peers); each row's details and
#                  per-instruction SASS (executions, stall samples) as CSVs, its headline metrics printed
#                  (PROFILE_ROWS picks rows; NOTES.md D50 read them)
#   kernels        ptxas's registers and spills of every kernel that static rows (BCHT B = 8 and 16 with the count,
#                  erase and set operations, double hashing B = 4), a chained and a CSR row compile
#                  (CubeCL's generated CUDA, CUBECL_DEBUG_LOG), for the new build and the baseline if carried
#   vulkan         every GPU test binary on the NVIDIA Vulkan driver; rates of every scheme at 2^24 (one process
#                  per scheme and load) on Vulkan and CUDA, with the SM clock sampled; base set's Vulkan rows too
#   ab             the headline rows with the baseline binaries (.device/base.tar.xz) and the new ones
#                  (.device/bins.tar.xz) in turn, one CSV with a `build` column, and the new/base ratios
# A device call runs at most 10 minutes: `tests`, `sanitize`, `bench-chained`, `bench-csr`, `bench-paged`,
# `bench-paged-big`, `bench-sweep`, `vulkan` and `ab` each want a call of their own; `bench-static peers` and
# `bench-host ceiling` fit together.
#
# Environment: BINS and BASE (the archives, default .device/bins.tar.xz and .device/base.tar.xz), OUT (result
# folder, default /tmp/out), RUNS (timed runs of the rate rows, default 3),
# ROUNDS and AB_ROWS for `ab` (default 2 rounds, base first then new first, of: static host chained csr paged;
# `open` is not in the default: 1CHT's bulk build, linear probing B = 1 and erases of BCHT B = 8 / double B = 4;
# one round of host-data rows swings 0.5-4x on the lent machines; give each call a part of the rows, e.g.
# AB_ROWS="static chained", to stay under the call's time limit), SAN_TOOLS for `sanitize`
# (default "memcheck racecheck") and SAN_BINS (only the rows of these test binaries, e.g. "growth
# device_writes"), SWEEP_SCHEMES and SWEEP_EXPERIMENTS for `bench-sweep` (a cut-short sweep is finished in
# another call with, e.g., SWEEP_SCHEMES=p2bht,1cht SWEEP_EXPERIMENTS=success).
# Ends by packing $OUT into $OUT/results.tgz (the device tool returns at most 8 files) beside a copy of this
# runner's output, $OUT/summary.txt. The runner sets no HASHTILE_* switch but HASHTILE_REQUIRE_GPU.
set -u
cd "$(dirname "$0")/.."
R=$PWD
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}
export PATH=/usr/local/cuda/bin:$PATH
# NCCL for the sharded tables (loaded by name, libnccl.so): the image's copy (PyTorch's wheel) under that name.
# NVLink multicast stays off on the shared machines (KINDS.md), though the exchange's sends and receives never
# use it.
export NCCL_NVLS_ENABLE=0
# Snapshot tests find their snapshots under this tree (the binaries name the build machine's path); never write.
export INSTA_WORKSPACE_ROOT=$R INSTA_UPDATE=no
nccl=$(find /usr/lib /usr/local /opt -name 'libnccl.so*' 2>/dev/null | head -1)
if [ -n "$nccl" ]; then
  mkdir -p /tmp/nccl && ln -sf "$nccl" /tmp/nccl/libnccl.so && export LD_LIBRARY_PATH=/tmp/nccl:$LD_LIBRARY_PATH
fi
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
RUNS=${RUNS:-3}
t0=$SECONDS

# The GPU test binaries (tests/tests/*.rs that run kernels); scripts/pack.sh packs the same list.
GPU_TESTS="host_path host_io gpu binned matrix gpu_scan csr chained paged paged_frames paged_stress kernel_cache growth model device_writes key_types mixed sets sharded sharded_ranks sharded_chained sharded_csr range_order windows tile_widths"

[ $# -gt 0 ] || { echo "usage: bash scripts/device.sh SUITE...  (suites: see the header of this file)"; exit 2; }
# On exit (a signal included): everything under $OUT but summary.txt into $OUT/results.tgz.
finish() {
  cd "$OUT" || return
  tar -czf /tmp/results.tgz --exclude ./results.tgz --exclude ./summary.txt . &&
    find . -mindepth 1 -maxdepth 1 ! -name results.tgz ! -name summary.txt -exec rm -rf {} + &&
    mv /tmp/results.tgz .
}
trap finish EXIT

carried() { # test binary: false, with a note, when the carried set is a part that leaves it out
  [ -z "${PACKED:-}" ] || [[ " $PACKED " == *" $1 "* ]] && return 0
  echo "-- $1: not in this call's part ($PACKED)"; return 1
}

need() { # file...: stop the suite when a carried file is missing
  local f
  for f in "$@"; do
    [ -e "$f" ] && continue
    echo "!! missing $f (see the header of scripts/device.sh)"; echo "$suite: missing $f" >> "$OUT/failed.txt"; return 1
  done
}

# `step NAME SECONDS CMD...`: one command into $D/NAME.txt under a time limit; prints its exit status and its
# test, sanitizer and error summaries on one line.
step() {
  local name=$1 limit=$2; shift 2
  timeout "$limit" "$@" > "$D/$name.txt" 2>&1
  local rc=$?
  [ $rc -ne 0 ] && echo "$suite/$name (exit $rc)" >> "$OUT/failed.txt"
  echo "== $name (exit $rc) at $((SECONDS - t0)) s: $(grep -hE 'test result|ERROR SUMMARY|RACECHECK SUMMARY|panicked|MISMATCH' "$D/$name.txt" | head -6 | tr '\n' ' ')"
  return $rc
}

# `rates NAME SECONDS BIN ARGS...`: one `hashtile-bench` rates run on CUDA into $D/NAME.{csv,txt}; prints its
# table rows.
rates() {
  local name=$1 limit=$2 bin=$3; shift 3
  step "$name" "$limit" "$bin" --backend cuda --runs "$RUNS" --csv "$D/$name.csv" "$@"
  grep -E "^\| (iht|p2bht|1cht|bcht|linear|double) " "$D/$name.txt" | grep -v async
}

# `paged NAME SECONDS BIN ARGS...`: one `hashtile-bench paged` run on CUDA, its CSV and SVG in $D/NAME/.
paged() {
  local name=$1 limit=$2 bin=$3; shift 3
  step "$name" "$limit" "$bin" paged --backend cuda --out-dir "$D/$name" "$@"
  grep -vE "^(wrote|trace)" "$D/$name.txt" | tail -4
}

# `merge OUT NAME...`: the CSVs $D/NAME.csv as one, each row led by its run's name.
merge() {
  local out=$1 n; shift
  for n in "$@"; do
    [ -s "$D/$n.csv" ] || continue
    if [ -s "$out" ]; then
      awk -v n="$n" 'NR > 1 && !/^#/ { print n "," $0 }' "$D/$n.csv" >> "$out"
    else
      awk -v n="$n" 'NR == 1 { print "run," $0; next } !/^#/ { print n "," $0 }' "$D/$n.csv" > "$out"
    fi
  done
}

suite_tests() {
  local t args
  for t in $GPU_TESTS; do
    carried $t || continue
    need $B/$t || continue
    case $t in
      gpu|matrix) args=(--test-threads 1) ;;
      paged|paged_stress) args=(--test-threads 4) ;;
      *) args=() ;;
    esac
    HASHTILE_REQUIRE_GPU=cuda step "$t" 200 $B/$t ${args[@]+"${args[@]}"}
  done
}

# Binary and test filters (small tests only: the sanitizers slow kernels down 10-100x; "" is the whole binary).
SAN_RUNS=(
  "host_path"
  "host_io"
  "gpu cuda_matches_oracle cuda_exchange_claims_match_oracle cuda_apply_device_matches_oracle cuda_erase_device cuda_inserts_take_erased"
  "growth one_batch_grows_many_times growth_drops_erased_slots"
  "binned cuda"
  "device_writes cuda"
  "matrix cuda_bcht_b8 cuda_iht_b16_u64 cuda_p2bht_b16 cuda_iht_one_sequence_b16 cuda_bcht_upsert_first_fit_b8 cuda_one_slot_bulk_build"
  "matrix cuda_linearprobing_b4_u32 cuda_doublehashing_b8_u32 aging_iht_cuda aging_linearprobing_cuda"
  "gpu_scan cuda"
  "csr cuda_"
  "chained"
  "paged prefetch_matches_paging_in_turn tombstone_erase"
  "paged_frames"
  "sets"
  "mixed adversarial bad_batches cuda_apply_device"
  "sharded device_slices a_table_called"
  "sharded_chained"
  "sharded_csr"
  "sharded_ranks ranks_match"
  "model _cuda"
  "key_types"
  "kernel_cache"
)
suite_sanitize() {
  local tool r bin
  for tool in ${SAN_TOOLS:-memcheck racecheck}; do
    for r in "${SAN_RUNS[@]}"; do
      set -- $r; bin=$1; shift
      # SAN_BINS (space separated) keeps the rows of those binaries only.
      [ -z "${SAN_BINS:-}" ] || [[ " $SAN_BINS " == *" $bin "* ]] || continue
      carried $bin || continue
      need $B/$bin || continue
      # NCCL's own kernels (their shared-memory protocol reads as races) and the API errors it probes with are
      # left out: what is checked is hashtile's kernels.
      HASHTILE_REQUIRE_GPU=cuda step "${tool}_$bin" 200 compute-sanitizer --tool "$tool" --error-exitcode 99 \
        --report-api-errors no --kernel-regex-exclude kns=nccl \
        --target-processes all $B/$bin --test-threads 1 "$@"
    done
  done
}

suite_bench_static() {
  local hb=$B/hashtile-bench
  need $hb || return
  rates bcht8_upsert 150 $hb --log2-keys 26 --scheme bcht --bucket 8 --load 0.8,0.9
  rates bcht8_no_upsert 150 $hb --log2-keys 26 --scheme bcht --bucket 8 --load 0.8,0.9 --no-upsert
  rates bcht8_binned 150 $hb --log2-keys 26 --scheme bcht --bucket 8 --load 0.8,0.9 --binning 128
  rates bcht16 150 $hb --log2-keys 26 --scheme bcht --bucket 16 --load 0.8,0.9 --no-upsert
  rates iht16_h2 150 $hb --log2-keys 26 --scheme iht --bucket 16 --load 0.8,0.9 --no-upsert --num-hashes 2
  rates iht16_h3 150 $hb --log2-keys 26 --scheme iht --bucket 16 --load 0.8,0.9 --no-upsert
  rates p2bht16 150 $hb --log2-keys 26 --scheme p2bht --bucket 16 --load 0.8,0.9 --no-upsert
  rates cht1 150 $hb --log2-keys 26 --scheme 1cht --bucket 1 --load 0.8,0.9 --no-upsert
  rates wide_2p24 100 $hb --log2-keys 24 --wide --scheme iht,p2bht --bucket 16 --load 0.8
  merge "$D/static.csv" bcht8_upsert bcht8_no_upsert bcht8_binned bcht16 iht16_h2 iht16_h3 p2bht16 cht1 wide_2p24
}

suite_bench_host() {
  local hb=$B/hashtile-bench b
  need $hb || return
  for b in 8 16; do
    step host_b$b 200 $hb host --backend cuda --log2-keys 26 --load 0.8,0.9 --runs "$RUNS" --bucket $b \
      --csv "$D/host_b$b.csv"
    grep -E "^bus|^0\.[0-9]+ +(vec|pinned) " "$D/host_b$b.txt"
  done
}

suite_bench_open() {
  local hb=$B/hashtile-bench
  need $hb || return
  # Inserts check for the key first, as cuCollections' `insert` does; `count16` rows are its `count_16`, the
  # erase rows its `erase` / `find_after_erase` (BCHT's since its inserts take erased slots again).
  rates linear_b1 150 $hb --log2-keys 26 --scheme linear --bucket 1 --load 0.8,0.9 --count --erase
  rates linear_b4 150 $hb --log2-keys 26 --scheme linear --bucket 4 --load 0.8,0.9 --count --erase
  rates double_b4 150 $hb --log2-keys 26 --scheme double --bucket 4 --load 0.8,0.9 --count --erase
  rates double_b8 150 $hb --log2-keys 26 --scheme double --bucket 8 --load 0.8,0.9 --count --erase
  rates bcht_b8_count 150 $hb --log2-keys 26 --scheme bcht --bucket 8 --load 0.8,0.9 --count --erase
  # Sets (4-byte slots) beside cuCollections' static_set rows (`set_insert`, `set_contains100` / `0`).
  rates sets_b8 200 $hb --log2-keys 26 --scheme bcht,double,linear --bucket 8 --load 0.8,0.9 --set
  rates sets_b16 200 $hb --log2-keys 26 --scheme bcht,double,iht --bucket 16 --load 0.8,0.9 --set
  # Device batches in table order (the default, RangeOrder::Auto) against the callers' order, same process.
  rates order_b1 200 $hb --log2-keys 26 --scheme linear,1cht --bucket 1 --load 0.8,0.9 --erase --range-order off,auto
  rates order_b8 150 $hb --log2-keys 26 --scheme bcht --bucket 8 --load 0.8,0.9 --erase --set --range-order off,auto
  merge "$D/open.csv" linear_b1 linear_b4 double_b4 double_b8 bcht_b8_count sets_b8 sets_b16 order_b1 order_b8
}

suite_bench_life() {
  local hb=$B/hashtile-bench
  need $hb || return
  # Through HashTable with host data, as users call it: growth from 2^20 to 2^26 keys in 2^20 batches against
  # one build of 2^26 (the rows' rate is 2^26 over the total time), and 20 aging rounds at load 0.85.
  rates growth_bcht8 300 $hb --log2-keys 26 --scheme bcht --bucket 8 --load 0.8 --growth
  rates growth_double8 300 $hb --log2-keys 26 --scheme double --bucket 8 --load 0.8 --growth
  # The 2^20 batches copied in 4 chunks of 2^18 each (TableConfig::copy_chunks; NOTES.md open problem 17), and
  # the host calls of 2^20 keys with 1 and 4 chunks, alternating, in the same call.
  local c r
  for r in 1 2; do
    for c in 1 4; do
      rates growth_bcht8_c${c}_r$r 300 $hb --log2-keys 26 --scheme bcht --bucket 8 --load 0.8 --growth --ops-only \
        --copy-chunks $c
      step host_2p20_c${c}_r$r 120 $hb host --backend cuda --log2-keys 20 --load 0.8 --runs "$RUNS" --bucket 8 \
        --copy-chunks $c --csv "$D/host_2p20_c${c}_r$r.csv"
      grep -E "^bus|^0\.[0-9]+ +(vec|pinned) " "$D/host_2p20_c${c}_r$r.txt"
    done
  done
  # Where a 2^20-key batch's time goes (the host path's phases; each mark waits for the device, so slower).
  step growth_trace 120 $hb --backend cuda --log2-keys 24 --scheme bcht --bucket 8 --load 0.8 --growth --ops-only \
    --runs 1 --trace
  rates aging_bcht8 300 $hb --log2-keys 26 --scheme bcht --bucket 8 --load 0.85 --aging
  rates aging_iht16 300 $hb --log2-keys 26 --scheme iht --bucket 16 --load 0.85 --aging
  # Linear probing and double hashing take erased slots again (NOTES.md D29): their rounds rebuild less.
  rates aging_double4 300 $hb --log2-keys 26 --scheme double --bucket 4 --load 0.85 --aging --ops-only
  rates aging_linear4 300 $hb --log2-keys 26 --scheme linear --bucket 4 --load 0.85 --aging --ops-only
  rates mixed_bcht8 300 $hb --log2-keys 26 --scheme bcht --bucket 8 --load 0.8 --mixed
  rates mixed_double8 300 $hb --log2-keys 26 --scheme double --bucket 8 --load 0.8 --mixed
  merge "$D/life.csv" growth_bcht8 growth_double8 aging_bcht8 aging_iht16 aging_double4 aging_linear4
}

suite_first_call() {
  local hb=$B/hashtile-bench
  need $hb || return
  step first_call 180 $hb first-call --backend cuda --log2-keys 20 --warm 2 --csv "$D/first_call.csv"
  cat "$D/first_call.csv"
}

suite_bench_families() {
  local hb=$B/hashtile-bench
  need $hb || return
  step families 400 $hb host --backend cuda --log2-keys 24 --load 0.8 --runs "$RUNS" --families \
    --csv "$D/families.csv"
  grep -E "^bus|^0\.8 +vec |acceptance 8" "$D/families.txt"
}

# SlabHash's slab_bench from .device/peers (reused if `peers` built it in this call).
slab_bench() {
  local p=$R/.device/peers
  if [ ! -x $p/bin/slab_bench ]; then
    mkdir -p $p/bin
    ( cd $p && step slab_build 200 nvcc -O3 -std=c++17 -arch=sm_90 --expt-extended-lambda --expt-relaxed-constexpr \
      -w -Ivendor/slab/src -Ivendor/slab/src/concurrent_map -Ivendor/slab/SlabAlloc/src slab_bench.cu -o bin/slab_bench )
  fi
  timeout 150 $p/bin/slab_bench 24 > "$D/slab.csv" 2> "$D/slab.err"
}

suite_bench_chained() {
  local hb=$B/hashtile-bench peer=()
  need $hb "$R/.device/peers/slab_bench.cu" || return
  slab_bench; local rc=$?
  echo "== slab_bench (exit $rc) at $((SECONDS - t0)) s"; cat "$D/slab.csv"
  # A failed or cut-off slab_bench leaves a torn CSV, which --peer-csv refuses: run without it then.
  [ $rc -eq 0 ] && [ -s "$D/slab.csv" ] && peer=(--peer-csv "$D/slab.csv")
  step chained 400 $hb chained --backend cuda --log2-keys 24 --runs 5 ${peer[@]+"${peer[@]}"} \
    --out-dir "$D/chained"
  grep -vE "^(chained: |wrote)" "$D/chained.txt" | head -60
}

suite_bench_csr() {
  local hb=$B/hashtile-bench
  need $hb || return
  step csr 330 $hb csr --backend cuda --log2-keys 25 --dups 1,4,32 --range 0.5,1,2 --runs "$RUNS" --csv "$D/csr.csv"
  grep -E "^cuda device" "$D/csr.txt"
  step scan 60 $hb scan --backend cuda --log2-words 16,20,24,25,26,28 --runs 5 --csv "$D/scan.csv"
  grep -E "^cuda " "$D/scan.txt"
}

suite_bench_paged() {
  local hb=$B/hashtile-bench
  need $hb || return
  paged res64 120 $hb --experiments residency --placements hash --children 64 --child-mib 16 --runs 7 --all-resident-only
  paged res16 120 $hb --experiments residency --placements hash --children 16 --runs 7 --all-resident-only
  paged big16 150 $hb --experiments big --big-gib 16 --big-budget-gib 4
  paged rebuild 120 $hb --experiments rebuild --log2-keys 26 --runs 5
  paged growth 150 $hb --experiments growth --child-mib 64 --log2-keys 26 --log2-batch 20
}

suite_bench_paged_big() {
  local hb=$B/hashtile-bench
  need $hb || return
  paged big84 420 $hb --experiments big --big-gib 84 --big-budget-gib 56 --big-keys 64
  paged residency 150 $hb --experiments residency --placements hash --children 16 --runs 3
}

suite_bench_sweep() {
  local hb=$B/hashtile-bench exp=()
  need $hb || return
  [ -n "${SWEEP_EXPERIMENTS:-}" ] && exp=(--experiments "$SWEEP_EXPERIMENTS")
  # The sweep rewrites its CSV, SVG and summary.md after every scheme of every experiment: a cut-short run keeps
  # what it measured.
  step sweep 540 $hb sweep --backend cuda --log2-keys 26 --load 0.6,0.7,0.8,0.9,0.95,0.99 --runs 3 \
    --min-log2-keys 18 --max-log2-keys 24 --probe-log2-keys 22 --success-log2-keys 18 --seeds 50 \
    --scheme "${SWEEP_SCHEMES:-bcht,iht,p2bht,1cht}" --bucket 16 ${exp[@]+"${exp[@]}"} --out "$D/sweep"
  [ -f "$D/sweep/summary.md" ] && sed -n '/^| scheme/,/^$/p' "$D/sweep/summary.md"
}

suite_peers() {
  need "$R/.device/peers/run.sh" || return
  step peers 300 bash "$R/.device/peers/run.sh" 26 0.8,0.9
  grep -E "^(peer|bght|cuco|slabhash)," "$D/peers.txt" > "$D/peers.csv"
  grep -E "^bght,(bcht,(8|16)|iht|p2bht|1cht)|^cuco,(dh,4|lp,1)," "$D/peers.csv" | cut -d, -f1-3,5-8 | tr '\n' ' '; echo
}

suite_bench_sharded() {
  local hb=$B/hashtile-bench
  need $hb || return
  step sharded 500 $hb sharded --backend cuda --log2-keys 26 --load 0.8 --shards 1,2,4 --runs "$RUNS" \
    --log2-exchange-steps 25,26,24 --ranks --csv "$D/sharded.csv" --plot "$D/sharded.svg"
  grep -E "^cuda," "$D/sharded.txt" | cut -d, -f3,7-20
  step sharded-chained 300 $hb sharded --family chained --backend cuda --log2-keys 24 --load 0.6 --shards 1,2,4 \
    --runs "$RUNS" --csv "$D/sharded-chained.csv" --plot "$D/sharded-chained.svg"
  grep -E "^cuda," "$D/sharded-chained.txt" | cut -d, -f3,7-11
  step sharded-csr 300 $hb sharded --family csr --backend cuda --log2-keys 24 --load 0.8 --shards 1,2,4 \
    --runs "$RUNS" --csv "$D/sharded-csr.csv" --plot "$D/sharded-csr.svg"
  grep -E "^cuda," "$D/sharded-csr.txt" | cut -d, -f3,7-11
}

suite_ceiling() {
  need "$R/.device/peers/ceiling.sh" || return
  step ceiling 120 bash "$R/.device/peers/ceiling.sh"
  grep -E "^ceiling," "$D/ceiling.txt" | tee "$D/ceiling.csv"
}

suite_profile() {
  command -v ncu > /dev/null || { echo "!! no ncu on this machine"; return 1; }
  local rows=${PROFILE_ROWS:-"bcht8_erase double4_erase lin1_erase lin1_insert cuco_erase cuco_insert"}
  local row re hb=$B/hashtile-bench P=$R/.device/peers
  local nv="nvcc -O3 -std=c++17 -arch=sm_90 --expt-extended-lambda --expt-relaxed-constexpr -w"
  if [[ " $rows " == *" cuco_"* ]]; then
    need "$P/cuco_ops_bench.cu" || return
    mkdir -p "$P/bin"
    step nvcc_cuco_ops 300 bash -c "cd '$P' && $nv -Ivendor/cuco cuco_ops_bench.cu -o bin/cuco_ops_bench" &
    step nvcc_cuco 300 bash -c "cd '$P' && $nv -Ivendor/cuco cuco_bench.cu -o bin/cuco_bench" &
    wait
  fi
  local hrow=(--backend cuda --log2-keys 26 --load 0.8 --runs 1 --warm-ms 0)
  for row in $rows; do
    case $row in
      bcht8_erase) re=erase_kernel; set -- "$hb" "${hrow[@]}" --scheme bcht --bucket 8 --erase --ops-only ;;
      double4_erase) re=erase_kernel; set -- "$hb" "${hrow[@]}" --scheme double --bucket 4 --erase --ops-only ;;
      lin1_erase) re=erase_kernel; set -- "$hb" "${hrow[@]}" --scheme linear --bucket 1 --erase --ops-only ;;
      lin1_insert) re=insert_kernel; set -- "$hb" "${hrow[@]}" --scheme linear --bucket 1 ;;
      cuco_erase) re=erase; set -- "$P/bin/cuco_ops_bench" 26 0.8 ;;
      cuco_insert) re=insert; set -- "$P/bin/cuco_bench" 26 0.8 ;;
      *) echo "!! unknown profile row $row"; echo "profile: unknown row $row" >> "$OUT/failed.txt"; continue ;;
    esac
    need "$1" || continue
    XDG_CACHE_HOME=$(mktemp -d) step "$row" 240 ncu --kernel-name "regex:$re" --launch-count 1 --set full \
      -o "$D/$row" "$@"
    [ -s "$D/$row.ncu-rep" ] || continue
    ncu -i "$D/$row.ncu-rep" --page details --csv > "$D/$row.details.csv" 2>&1
    ncu -i "$D/$row.ncu-rep" --page source --csv --print-source sass > "$D/$row.sass.csv" 2>&1
    rm -f "$D/$row.ncu-rep"
    # The headline metrics: the details CSV quotes every field; the 13th is the name, the 15th the value.
    grep -E '"(Duration|Executed Instructions|Issue Slots Busy|Achieved Occupancy|Registers Per Thread)"' \
      "$D/$row.details.csv" | awk -F'","' '{ v = $15; sub(/",*$/, "", v); printf "%s=%s ", $13, v } END { print "" }'
  done
}

# `kernel_regs BUILD ROW LOG`: every kernel CubeCL compiled in LOG (CUBECL_DEBUG_LOG) into its own .cu file, each
# compiled by nvcc for the GPU with ptxas's report: one CSV line per kernel (its name and launch mode, registers,
# spill bytes) into $D/kernels.csv.
kernel_regs() {
  local v=$1 row=$2 log=$3 src="$D/src_$1_$2" f name mode line
  mkdir -p "$src"
  [ -s "$log" ] || { echo "!! $v $row: no kernel log (kernels cached?)"; return; }
  awk -v dir="$src" '
    /^\[START_KERNEL_COMPILATION\]/ { n++; mode = "-"; insrc = 0; next }
    /^ +mode: [0-9]+,/ && mode == "-" { mode = $2; sub(",", "", mode) }
    /^```cpp/ { insrc = 1; out = sprintf("%s/k%03d.cu", dir, n); print mode > (out ".mode"); next }
    /^```/ && insrc { insrc = 0; close(out); next }
    insrc { print > out }' "$log"
  arch=$(nvidia-smi --query-gpu=compute_cap --format=csv,noheader | head -1 | tr -d .)
  for f in "$src"/k*.cu; do
    name=$(grep -o '__launch_bounds__([0-9, ]*) *[A-Za-z_0-9]*' "$f" | head -1 | sed 's/.*) *//')
    mode=$(cat "$f.mode")
    line=$(nvcc -arch=sm_"$arch" -cubin -Xptxas -v -o /tmp/k.cubin "$f" 2>&1 | tr '\n' ' ')
    echo "$v,$row,$(basename "$f" .cu),$name,$mode,$(echo "$line" | sed -n 's/.*Used \([0-9]*\) registers.*/\1/p'),$(echo "$line" | sed -n 's/.* \([0-9]*\) bytes spill stores.*/\1/p'),$(echo "$line" | sed -n 's/.* \([0-9]*\) bytes spill loads.*/\1/p')" >> "$D/kernels.csv"
  done
}
# `kernels`: the registers of every kernel a few rows compile, for the new build and (if carried) the baseline,
# side by side: a kernel whose registers grew past an occupancy step shows here before it shows in a rate
# (NOTES.md open problem 23). Each build runs with a cache directory of its own, so that every kernel compiles.
suite_kernels() {
  need $B/hashtile-bench || return
  echo "build,row,kernel_index,kernel,mode,registers,spill_store_bytes,spill_load_bytes" > "$D/kernels.csv"
  local v dir row log
  for v in base new; do
    dir=$B; [ $v = base ] && dir=$A
    [ -x "$dir/hashtile-bench" ] || continue
    for row in static ops double chained csr; do
      log="$D/${v}_$row.log"
      case $row in
        static) set -- --log2-keys 20 --runs 1 --scheme bcht --bucket 8 --load 0.8 ;;
        ops) set -- --log2-keys 20 --runs 1 --scheme bcht --bucket 16 --load 0.8 --ops-only --ops count,erase,set ;;
        double) set -- --log2-keys 20 --runs 1 --scheme double --bucket 4 --load 0.8 --ops count,erase ;;
        chained) set -- chained --log2-keys 20 --runs 1 --experiments bulk --loads 0.6 --out-dir "$D/${v}_$row" ;;
        csr) set -- csr --log2-keys 20 --runs 1 --builds v2 --csv "$D/${v}_$row.csv" ;;
      esac
      XDG_CACHE_HOME=$(mktemp -d) CUBECL_DEBUG_LOG="$log" step "${v}_$row" 120 "$dir/hashtile-bench" --backend cuda "$@"
      kernel_regs $v $row "$log"
    done
  done
  echo "== kernels whose registers differ between the builds (build,row,kernel,mode: registers):"
  awk -F, 'NR > 1 { k = $2 "," $4 "," $5; r[k, $1] = r[k, $1] " " $6; keys[k] = 1 }
    END { for (k in keys) if (r[k, "base"] != r[k, "new"] && r[k, "base"] != "") print k ": base" r[k, "base"] ", new" r[k, "new"] }' \
    "$D/kernels.csv" | sort
}

suite_vulkan() {
  local t f args hb=$B/hashtile-bench
  if [ -d "$R/.gl" ]; then
    for f in "$R"/.gl/*.deb; do dpkg -x "$f" /; done; ldconfig
  fi
  local icd=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json
  [ -z "${VK_DRIVER_FILES:-}" ] && [ -f $icd ] && export VK_DRIVER_FILES=$icd
  ldconfig -p | grep -q libvulkan || { echo "!! no libvulkan: carry .gl (docs/PERFORMANCE.md, Vulkan)"; return 1; }
  for t in $GPU_TESTS; do
    [ -e $B/$t ] || continue
    case $t in
      gpu|matrix) args=(--test-threads 1 vulkan) ;;  # their tests name the backend
      paged|paged_stress) args=(--test-threads 4) ;;  # these run on every backend present
      *) args=() ;;
    esac
    HASHTILE_REQUIRE_GPU=vulkan step "$t" 300 $B/$t ${args[@]+"${args[@]}"}
  done
  need $hb || return
  # Rates: one process per scheme and load (the NVIDIA driver lowers the SM clock a few seconds into a Vulkan
  # process, reporting "GPU idle" while its kernels run; CUDA keeps the boost clock), each beside CUDA's, with
  # the SM clock sampled through it; with a base set carried, the base binary's Vulkan rows too.
  local sb scheme bucket load v bin
  echo "build,backend,scheme,bucket,load,op,present,median_mkeys_s,min_sm_mhz" > "$D/vulkan_rates.csv"
  for sb in "bcht 8" "bcht 16" "iht 16" "p2bht 16" "1cht 1"; do
    set -- $sb; scheme=$1 bucket=$2
    for load in 0.8 0.9; do
      for v in new base cuda; do
        bin=$hb; [ $v = base ] && bin=$A/hashtile-bench
        [ -x "$bin" ] || continue
        local be=vulkan; [ $v = cuda ] && be=cuda
        local n=${v}_${scheme}${bucket}_$load
        nvidia-smi --query-gpu=clocks.sm --format=csv,noheader,nounits -lms 50 > "$D/clk_$n.txt" 2>/dev/null &
        local clk=$!
        step "$n" 90 $bin --backend $be --scheme $scheme --bucket $bucket --load $load --log2-keys 24 \
          --runs "$RUNS" --csv "$D/$n.csv"
        kill $clk 2>/dev/null
        # The lowest SM clock once the process's work has raised it (before that the GPU idles at its floor).
        local mhz; mhz=$(awk 'NF { if ($1 >= 1500) up = 1; if (up && (m == "" || $1 < m)) m = $1 } END { print m }' \
          "$D/clk_$n.txt")
        [ $v = cuda ] && v=new
        awk -F, -v b=$v -v m="$mhz" -v OFS=, 'NR > 1 && $6 != "insert-async" { print b, $1, $2, $3, $5, $6, $7, $8, m }' \
          "$D/$n.csv" >> "$D/vulkan_rates.csv"
      done
    done
  done
  # Vulkan over CUDA per row (the new build), and new over base on Vulkan.
  awk -F, 'NR > 1 { k = $3 " B" $4 " " $5 " " $6 " " $7; r[k, $1 "-" $2] = $8; c[k, $1 "-" $2] = $9; keys[k] = 1 }
    END { printf "%-28s %9s %9s %9s %6s %6s %s\n", "row", "cuda", "vulkan", "vk-base", "vk/cu", "new/b", "min MHz (vk)"
      for (k in keys) printf "%-28s %9.0f %9.0f %9.0f %6.2f %6.2f %s\n", k, r[k, "new-cuda"], r[k, "new-vulkan"],
        r[k, "base-vulkan"], r[k, "new-cuda"] ? r[k, "new-vulkan"] / r[k, "new-cuda"] : 0,
        r[k, "base-vulkan"] ? r[k, "new-vulkan"] / r[k, "base-vulkan"] : 0, c[k, "new-vulkan"] }' \
    "$D/vulkan_rates.csv" | sort | tee "$D/vulkan_ratios.txt"
}

# `ab`: each row with the base binary and the new one in turn (order flipped every round), every CSV reduced to
# `build,round,row,case,metric,value` in ab.csv, then new/base per case (the means' and the medians' ratio over
# rounds) in ab_ratios.csv.
extract() { # csv build round row key-columns value-columns
  [ -s "$1" ] || return 0
  awk -F, -v OFS=, -v b="$2" -v r="$3" -v row="$4" -v kc="$5" -v vc="$6" '
    /^#/ { next }
    !h { for (i = 1; i <= NF; i++) col[$i] = i; nk = split(kc, K, ","); nv = split(vc, V, ","); h = 1; next }
    { key = ""; for (i = 1; i <= nk; i++) if (K[i] in col) key = key (key == "" ? "" : " ") K[i] "=" $(col[K[i]])
      for (j = 1; j <= nv; j++) if (V[j] in col) print b, r, row, key, V[j], $(col[V[j]]) }' "$1" >> "$D/ab.csv"
}
# `ab_rates NAME ARGS...`, called from ab_row: one `rates` row of 2^26 keys by ab_row's binary, its rates reduced
# into ab.csv under ab_row's build, round and row (bash's dynamic scope hands it ab_row's locals n, v, r, row, hb).
ab_rates() {
  local name="${n}_$1"; shift
  rates "$name" 150 $hb --log2-keys 26 "$@"
  extract "$D/$name.csv" $v $r $row scheme,bucket,load,op,present median_mkeys_s
}
ab_row() { # build round row dir-of-binaries
  local v=$1 r=$2 row=$3 hb=$4/hashtile-bench n="$3_$1_r$2"
  case $row in
    static)
      ab_rates bcht8 --scheme bcht --bucket 8 --load 0.8,0.9
      ab_rates iht16 --scheme iht --bucket 16 --load 0.8,0.9 ;;
    host)
      step "$n" 150 $hb host --backend cuda --log2-keys 26 --load 0.8 --runs "$RUNS" --csv "$D/$n.csv"
      extract "$D/$n.csv" $v $r $row memory,call,load rate_mkeys,ratio ;;
    chained)
      step "$n" 200 $hb chained --backend cuda --log2-keys 24 --runs "$RUNS" --experiments bulk,incremental \
        --loads 0.6,0.8 --batches 17 --out-dir "$D/$n"
      extract "$D/$n/chained_bulk.csv" $v $r $row load \
        build_insert_gkeys_s,build_replace_gkeys_s,find_present_gkeys_s,find_absent_gkeys_s
      extract "$D/$n/chained_incremental.csv" $v $r $row log2_batch incremental_gkeys_s ;;
    csr)
      step "$n" 150 $hb csr --backend cuda --log2-keys 25 --dups 1,32 --range 1 --builds v2 --runs "$RUNS" --csv "$D/$n.csv"
      extract "$D/$n.csv" $v $r $row data,dups,range,op mkeys_s,bus_mkeys_s ;;
    open)
      ab_rates cht1 --scheme 1cht --bucket 1 --load 0.8 --no-upsert
      ab_rates linear1 --scheme linear --bucket 1 --load 0.8
      ab_rates erase --scheme bcht --bucket 8 --load 0.8,0.9 --erase --ops-only
      ab_rates erase_double --scheme double --bucket 4 --load 0.8 --erase --ops-only ;;
    paged)
      paged "$n" 120 $hb --experiments residency --placements hash --children 64 --child-mib 16 --runs 5 --all-resident-only
      extract "$D/$n/paged_residency.csv" $v $r $row table,children,resident,op M_keys_per_s
      paged "${n}_big16" 150 $hb --experiments big --big-gib 16 --big-budget-gib 4
      extract "$D/${n}_big16/paged_big_16g_32bit.csv" $v $r $row table_GiB,budget_GiB \
        build_M_keys_per_s,build_of_pinned,find_of_pinned ;;
    *) echo "!! unknown ab row $row (static host chained csr paged open)" ;;
  esac
}
suite_ab() {
  need $A/hashtile-bench $B/hashtile-bench || return
  local r row order v
  echo "build,round,row,case,metric,value" > "$D/ab.csv"
  for r in $(seq 1 "${ROUNDS:-2}"); do
    order="base new"; [ $((r % 2)) -eq 0 ] && order="new base"
    for row in ${AB_ROWS:-static host chained csr paged}; do
      for v in $order; do
        if [ $v = base ]; then ab_row base $r $row $A; else ab_row new $r $row $B; fi
      done
    done
  done
  # The means' ratio, and the lowest and highest ratio of one round's new to the same round's base (how far the
  # rounds swing: a host-data row's rounds move with the bus).
  # The medians' ratio too: a host-data row's rounds swing with the host (0.7-1.5x between rounds of one binary),
  # and one low round moves the mean past 2% where the median holds.
  echo "row,case,metric,base,new,new_over_base,round_min,round_max,median_new_over_base" > "$D/ab_ratios.csv"
  awk -F, -v OFS=, '
    function median(k, b,   r, m, i, j, t, a) {
      m = 0
      for (r = 1; r <= rmax; r++) if ((k, b, r) in v) a[++m] = v[k, b, r] + 0
      for (i = 2; i <= m; i++) { t = a[i]; for (j = i - 1; j >= 1 && a[j] > t; j--) a[j + 1] = a[j]; a[j + 1] = t }
      return m % 2 ? a[(m + 1) / 2] : (a[m / 2] + a[m / 2 + 1]) / 2 }
    NR > 1 { k = $3 "," $4 "," $5; s[k, $1] += $6; c[k, $1]++; keys[k] = 1; v[k, $1, $2] = $6
      if ($2 > rmax) rmax = $2 }
    END { for (k in keys) if (c[k, "base"] && c[k, "new"]) {
        b = s[k, "base"] / c[k, "base"]; n = s[k, "new"] / c[k, "new"]; lo = ""; hi = ""
        for (r = 1; r <= rmax; r++) if ((k, "base", r) in v && (k, "new", r) in v && v[k, "base", r] > 0) {
          q = v[k, "new", r] / v[k, "base", r]
          if (lo == "" || q < lo) lo = q
          if (hi == "" || q > hi) hi = q }
        mb = median(k, "base"); mn = median(k, "new")
        print k, b, n, (b > 0 ? sprintf("%.4f", n / b) : "NaN"), (lo == "" ? "" : sprintf("%.4f", lo)),
          (hi == "" ? "" : sprintf("%.4f", hi)), (mb > 0 ? sprintf("%.4f", mn / mb) : "NaN") } }' "$D/ab.csv" |
    sort >> "$D/ab_ratios.csv"
  echo "== ab: new/base below 0.98 (the means' or the medians' ratio over ${ROUNDS:-2} round(s)):"
  awk -F, 'NR > 1 && (($6 != "NaN" && $6 < 0.98) || ($9 != "NaN" && $9 < 0.98))' "$D/ab_ratios.csv"
}

main() {
  nvidia-smi --query-gpu=name,driver_version,clocks.max.sm,clocks.max.mem,memory.total --format=csv,noheader |
    tee "$OUT/gpu.txt"

  # Binaries: $BINS into $B, the baseline $BASE (if carried) into $A.
  B=/tmp/bin/new A=/tmp/bin/base
  local bins=${BINS:-.device/bins.tar.xz} base=${BASE:-.device/base.tar.xz}
  rm -rf /tmp/bin && mkdir -p $B $A
  if [ -f "$bins" ]; then
    tar -xJf "$bins" -C $B && cat $B/build-info.txt 2>/dev/null | tee "$OUT/build-new.txt"
  fi
  if [ -f "$base" ]; then
    tar -xJf "$base" -C $A && cat $A/build-info.txt 2>/dev/null | tee "$OUT/build-base.txt"
  fi
  # The test binaries the new set carries (pack.sh's `tests:` line; a part of them when packed with --tests).
  PACKED=$(sed -n 's/^tests: //p' $B/build-info.txt 2>/dev/null)
  for suite in "$@"; do
    D=$OUT/$suite; mkdir -p "$D"
    echo "==== $suite at $((SECONDS - t0)) s"
    case $suite in
      tests) suite_tests ;;
      sanitize) suite_sanitize ;;
      bench-static) suite_bench_static ;;
      bench-host) suite_bench_host ;;
      bench-families) suite_bench_families ;;
      bench-open) suite_bench_open ;;
      first-call) suite_first_call ;;
      bench-sharded) suite_bench_sharded ;;
      bench-life) suite_bench_life ;;
      bench-chained) suite_bench_chained ;;
      bench-csr) suite_bench_csr ;;
      bench-paged) suite_bench_paged ;;
      bench-paged-big) suite_bench_paged_big ;;
      bench-sweep) suite_bench_sweep ;;
      peers) suite_peers ;;
      ceiling) suite_ceiling ;;
      profile) suite_profile ;;
      kernels) suite_kernels ;;
      vulkan) suite_vulkan ;;
      ab) suite_ab ;;
      *) echo "!! unknown suite $suite"; echo "$suite: unknown suite" >> "$OUT/failed.txt" ;;
    esac
  done
  echo "==== all done at $((SECONDS - t0)) s; steps that failed or ran out of time: $(cat "$OUT/failed.txt" 2>/dev/null | tr '\n' ' ')"
}

main "$@" 2>&1 | tee "$OUT/summary.txt"
[ ! -s "$OUT/failed.txt" ]
