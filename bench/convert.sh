#!/usr/bin/env bash
# Converter benchmark (not a test): wall time and peak memory of `graph-ascend convert`.
#
# 1. The real 20,758-entry pair (shared/fixtures/big, when present): build and compare, against
#    msprobe's figures on this machine class (3.0 s / 253 MB build, 13.3 s / 474 MB compare).
# 2. Synthetic dumps from `gen_dump` at growing sizes (BENCH_SIZES, default 20k 100k 300k
#    entries a side; add 1000000 for the 1M point): how time and memory grow with size.
#
# Env: GA (binary, default target/release/graph-ascend), BIG_DIR (folder with
# big_stats_{a,b}.tar.xz), BENCH_SIZES, BENCH_TMP.
set -euo pipefail
cd "$(dirname "$0")/.."
GA=${GA:-target/release/graph-ascend}
BIG_DIR=${BIG_DIR:-/work/shared/fixtures/big}
SIZES=${BENCH_SIZES:-"20000 100000 300000"}
TMP=${BENCH_TMP:-$(mktemp -d)}
trap 'rm -rf "$TMP"' EXIT

cargo build --release -q -p graph-ascend-convert --bin gen_dump
GEN=target/release/gen_dump
[ -x "$GA" ] || cargo build --release -q -p graph-ascend

measure() { # label, then the command; prints "label  wall_s  peak_MB"
  local label=$1; shift
  /usr/bin/time -o "$TMP/time" -f "%e %M" "$@" >/dev/null 2>"$TMP/err" || {
    echo "$label: FAILED"; cat "$TMP/err"; return 1; }
  read -r wall kb <"$TMP/time"
  printf "%-28s %8.2f s %8.0f MB\n" "$label" "$wall" "$((kb / 1024))"
}

echo "== graph-ascend convert benchmark ($(nproc) cores, load $(cut -d' ' -f1 /proc/loadavg))"
if [ -f "$BIG_DIR/big_stats_a.tar.xz" ]; then
  mkdir -p "$TMP/big"
  tar xJf "$BIG_DIR/big_stats_a.tar.xz" -C "$TMP/big"
  tar xJf "$BIG_DIR/big_stats_b.tar.xz" -C "$TMP/big"
  A=$(ls -d "$TMP"/big/big_stats_a/step0/*/)
  B=$(ls -d "$TMP"/big/big_stats_b/step0/*/)
  echo "-- real dumps, 20,758 entries a side (msprobe: build 3.0 s / 253 MB, compare 13.3 s / 474 MB)"
  measure "big build" "$GA" convert -tp "$A" -o "$TMP/out"
  measure "big compare" "$GA" convert -tp "$B" -gp "$A" -o "$TMP/out"
  rm -rf "$TMP/out"
else
  echo "-- $BIG_DIR not found: skipping the real pair"
fi

echo "-- synthetic dumps (gen_dump), entries a side"
for n in $SIZES; do
  rm -rf "$TMP/gen"
  "$GEN" "$TMP/gen/a" "$n" >/dev/null
  "$GEN" "$TMP/gen/b" "$n" --perturb >/dev/null
  measure "synthetic $n build" "$GA" convert -tp "$TMP/gen/a/step0/rank0" -o "$TMP/out"
  measure "synthetic $n compare" "$GA" convert -tp "$TMP/gen/b/step0/rank0" -gp "$TMP/gen/a/step0/rank0" -o "$TMP/out"
  rm -rf "$TMP/out"
done
