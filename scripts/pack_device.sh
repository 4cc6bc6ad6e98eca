#!/usr/bin/env bash
# Packs the stripped release binaries the device scripts expect into .device/bins.tar.xz (build first:
# cargo build --release --workspace --all-targets). Extra arguments: more files to put in beside them
# (for example a previous hashtile-bench renamed hashtile-bench-old).
set -euo pipefail
cd "$(dirname "$0")/.."
stage=$(mktemp -d)
cp target/release/hashtile-bench "$stage/"
for t in host_path gpu matrix gpu_scan csr chained paged paged_frames paged_stress; do
  cp "$(ls -t target/release/deps/$t-* | grep -v '\.d$' | head -1)" "$stage/$t"
done
for f in "$@"; do cp "$f" "$stage/"; done
strip "$stage"/*
mkdir -p .device
(cd "$stage" && tar -cJf "$OLDPWD/.device/bins.tar.xz" ./*)
rm -rf "$stage"
ls -la .device/bins.tar.xz
