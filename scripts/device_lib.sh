# Sourced by the device-call scripts (scripts/h100_issue9*.sh): the CUDA environment, the binaries of
# .device/bins.tar.xz unpacked into $B, one archive of $OUT on exit (the device tool returns at most 8 files),
# `step` (below) and `bench NAME BIN ARGS...`: one hashtile-bench run at 2^26 keys into $OUT/NAME.{csv,txt}, its rows printed
# on one line. Expects t0 (start time), RUNS and OUT may be set before sourcing.
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}
export PATH=/usr/local/cuda/bin:$PATH
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
RUNS=${RUNS:-3}
t0=${t0:-$SECONDS}
trap '(cd "$OUT" && tar -czf /tmp/results.tgz --exclude results.tgz . && find . -type f ! -name results.tgz -delete && mv /tmp/results.tgz .)' EXIT
B=/tmp/bin; rm -rf $B; mkdir -p $B && tar -xJf .device/bins.tar.xz -C $B

# The table rows of a bench log on one line: `load op present=G keys/s`.
row() {
  grep -E "^\| (iht|p2bht|1cht|bcht) " "$1" | grep -v async |
    awk -F'|' '{gsub(/ /,"",$4);gsub(/ /,"",$5);gsub(/ /,"",$6);gsub(/ /,"",$7); printf "%s %s%s=%.2f  ", $4,$5,$6,$7/1000}'
  echo
}

# `step NAME SECONDS CMD...`: one command into $OUT/NAME.txt under a time limit, its test and sanitizer
# summaries printed on one line.
step() { # name timeout cmd...
  local name=$1 limit=$2; shift 2
  timeout "$limit" "$@" > "$OUT/$name.txt" 2>&1
  echo "== $name (exit $?) at $((SECONDS - t0)) s: $(grep -E 'test result|ERROR SUMMARY|RACECHECK SUMMARY' "$OUT/$name.txt" | tr '\n' ' ')"
}

bench() { # name bin args...
  local name=$1 bin=$2; shift 2
  timeout 150 "$bin" --backend cuda --log2-keys 26 --runs "$RUNS" --csv "$OUT/$name.csv" "$@" > "$OUT/$name.txt" 2>&1
  echo "== $name (exit $?) at $((SECONDS - t0)) s: $(row "$OUT/$name.txt")"
}

# `paged_bench NAME SECONDS ARGS...`: one `hashtile-bench paged` run on CUDA into $OUT/paged (CSV, SVG) and
# $OUT/NAME.txt, its last TAIL (default 8) lines printed, trace lines left out.
paged_bench() { # name limit args...
  local name=$1 limit=$2; shift 2
  mkdir -p "$OUT/paged"
  timeout "$limit" $B/hashtile-bench paged --backend cuda --out-dir "$OUT/paged" "$@" > "$OUT/$name.txt" 2>&1
  echo "== $name (exit $?) at $((SECONDS - t0)) s"; grep -v "^wrote" "$OUT/$name.txt" | grep -v "^trace" | tail -"${TAIL:-8}"
}
