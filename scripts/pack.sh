#!/usr/bin/env bash
# Packs the stripped release binaries that scripts/device.sh runs into .device/<name>.tar.xz: hashtile-bench and
# every GPU test binary of the runner's GPU_TESTS list, with build-info.txt (commit, tree state, date, rustc).
#
#   cargo build --release --workspace --all-targets
#   bash scripts/pack.sh                          # -> .device/bins.tar.xz (the build under test)
#   bash scripts/pack.sh --as base --target target-ab --commit main
#                                                 # -> .device/base.tar.xz (the baseline of `device.sh ab`)
#   bash scripts/pack.sh EXTRA_FILE...            # more files beside them
#   bash scripts/pack.sh --as tests-a --tests "matrix gpu"
#                                                 # -> .device/tests-a.tar.xz: hashtile-bench and these test
#                                                 #    binaries only ("none": none); every test binary packed
#                                                 #    is ~100 MB, past the device call's 64 MiB, so a call
#                                                 #    carries a part (device.sh's BINS names it)
#
# A baseline: build the previous main in its own tree and target folder, for example
#   git worktree add /tmp/hashtile-base main && (cd /tmp/hashtile-base &&
#     cargo build --release -p hashtile-bench --target-dir "$PWD/../main/target-ab")   # target-ab/ is ignored
# (the baseline needs only hashtile-bench: its missing test binaries are skipped with a note).
# Options may also come from the environment: PACK_AS, PACK_TARGET, PACK_COMMIT, PACK_TESTS.
set -euo pipefail
cd "$(dirname "$0")/.."
as=${PACK_AS:-bins} target=${PACK_TARGET:-target} commit=${PACK_COMMIT:-HEAD} only=${PACK_TESTS:-}
extra=()
while [ $# -gt 0 ]; do
  case $1 in
    --as) as=$2; shift 2 ;;
    --target) target=$2; shift 2 ;;
    --commit) commit=$2; shift 2 ;;
    --tests) only=$2; shift 2 ;;
    -h|--help) sed -n '2,21p' "$0"; exit 0 ;;
    *) extra+=("$1"); shift ;;
  esac
done
tests=$(sed -n 's/^GPU_TESTS="\(.*\)"$/\1/p' scripts/device.sh)
[ -n "$tests" ] || { echo "pack.sh: no GPU_TESTS line in scripts/device.sh" >&2; exit 1; }
if [ "$only" = none ]; then
  tests=""
elif [ -n "$only" ]; then
  for t in $only; do
    [[ " $tests " == *" $t "* ]] || { echo "pack.sh: $t is not in device.sh's GPU_TESTS" >&2; exit 1; }
  done
  tests=$only
fi
stage=$(mktemp -d)
trap 'rm -rf "$stage"' EXIT
cp "$target/release/hashtile-bench" "$stage/"
for t in $tests; do
  # The newest executable test binary named <t>-<hash> (not `.d` files; `paged-*` does not match paged_frames-*).
  bin=$(ls -t "$target"/release/deps/"$t"-* 2>/dev/null | grep -v '\.d$' | while read -r f; do
    [ -x "$f" ] && { echo "$f"; break; }; done || true)
  if [ -n "$bin" ]; then
    cp "$bin" "$stage/$t"
  elif [ "$as" = bins ]; then
    echo "pack.sh: no test binary $t in $target/release/deps (cargo build --release --workspace --all-targets)" >&2
    exit 1
  else
    echo "pack.sh: $as: no test binary $t (skipped)" >&2
  fi
done
for f in ${extra[@]+"${extra[@]}"}; do cp "$f" "$stage/"; done
strip "$stage"/* 2>/dev/null || true
{
  echo "set: $as"
  echo "commit: $(git rev-parse --short "$commit" 2>/dev/null || echo "$commit")"
  [ "$commit" = HEAD ] && echo "tree: $(git status --porcelain --untracked-files=no | wc -l) files changed since HEAD"
  echo "packed: $(date -u +%Y-%m-%dT%H:%MZ)"
  echo "tests: ${tests:-none}"
  echo "rustc: $(rustc --version 2>/dev/null || echo unknown)"
} > "$stage/build-info.txt"
mkdir -p .device
(cd "$stage" && XZ_OPT=-T0 tar -cJf "$OLDPWD/.device/$as.tar.xz" ./*)
ls -la ".device/$as.tar.xz"
cat "$stage/build-info.txt"
