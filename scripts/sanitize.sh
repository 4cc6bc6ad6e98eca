#!/usr/bin/env bash
# compute-sanitizer (memcheck, racecheck, synccheck) over the CUDA kernel tests: the host path (duplicate,
# classify and masked insert passes, finds with presence bits, pinned copies), the GPU oracle and exchange-path
# tests, and the matrix's CUDA instances of one bucket size and of one wide-pair layout. Prints one line per tool and test binary and exits
# non-zero if any tool reports an error.
#
# Usage (on the GPU machine, with the test binaries built by `cargo test --release --no-run` and copied to
# .device/): bash scripts/sanitize.sh [.device]   # OUT=dir keeps the full logs
set -u
BIN=${1:-.device}
OUT=${OUT:-/tmp/sanitize}; mkdir -p "$OUT"
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}
export HASHTILE_REQUIRE_GPU=cuda
SAN=$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)
status=0
# binary, test filter (small tests only: the sanitizers slow kernels down 10-100x)
runs=(
  "host_path cuda_or_all"
  "gpu cuda_matches_oracle"
  "gpu cuda_exchange_claims_match_oracle"
  "matrix cuda_bcht_b8"
  "matrix cuda_iht_b16_u64"
  "matrix cuda_p2bht_b16"
  "gpu_scan cuda"
  "csr cuda"
)
for tool in memcheck racecheck synccheck; do
  for r in "${runs[@]}"; do
    set -- $r
    bin=$1; filter=$2
    [ "$filter" = cuda_or_all ] && filter=""
    log="$OUT/${tool}_${bin}_${filter:-all}.txt"
    timeout ${SAN_TIMEOUT:-150} "$SAN" --tool "$tool" --error-exitcode 99 --target-processes all \
      "$BIN/$bin" --test-threads 1 $filter > "$log" 2>&1
    rc=$?
    summary=$(grep -E "ERROR SUMMARY|RACECHECK SUMMARY|test result" "$log" | tr '\n' ' ')
    echo "$tool $bin ${filter:-all}: exit $rc; $summary"
    [ $rc -ne 0 ] && status=1
  done
done
exit $status
