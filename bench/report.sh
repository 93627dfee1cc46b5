#!/usr/bin/env bash
# Report benchmark (not a test): `graph-ascend report` (the self-contained HTML, docs/report.md), its size
# and the time to write it, and its first paint opened from file:// in headless Chromium with the network
# blocked (bench/report_paint.mjs: from navigation to both graphs drawn; target <= 2 s).
#
# 1. the demo's compare file (examples/compare_tf_stats);
# 2. the real 48-layer pair (BIG_DIR, by default tests/fixtures/big: big_stats_{a,b}.tar.xz), converted as
#    the CLI tests convert it (`convert -tp b -gp a`); target: the report <= 10 MB;
# 3. a synthetic compare of about BENCH_REPORT_NODES nodes (default 1,000,000; gen_visdb), or the file
#    BENCH_REPORT_1M names; the report holds the top levels and the paths to the sources and says what
#    it leaves out;
# 4. the compare users make of BENCH_REPORT_DUMP entries a side (default 1,000,000; 0 skips it): `gen_dump`
#    a, `gen_dump` b --perturb and our `convert` (a flat top level of ~222k boxes at 1M); target: written
#    in <= 60 s and 1 GB, or its views refused with why (the report says which).
#
# Env: GA (binary, default target/release/graph-ascend; the page's build is found beside it, or give
# GA_ASSETS), BIG_DIR, BENCH_REPORT_NODES, BENCH_REPORT_1M, BENCH_REPORT_DUMP, BENCH_TMP (work folder, default a temporary
# one, removed at the end), GA_CHROMIUM (default /usr/bin/chromium).
set -euo pipefail
[ -n "${BIG_DIR:-}" ] && BIG_DIR=$(realpath -m -- "$BIG_DIR")
[ -n "${BENCH_REPORT_1M:-}" ] && BENCH_REPORT_1M=$(realpath -m -- "$BENCH_REPORT_1M")
cd "$(dirname "$0")/.."
GA=${GA:-target/release/graph-ascend}
BIG_DIR=${BIG_DIR:-tests/fixtures/big}
NODES=${BENCH_REPORT_NODES:-1000000}
DUMP_ENTRIES=${BENCH_REPORT_DUMP:-1000000}
TMP=${BENCH_TMP:-$(mktemp -d)}
[ -n "${BENCH_TMP:-}" ] || trap 'rm -rf "$TMP"' EXIT
ASSETS=()
[ -n "${GA_ASSETS:-}" ] && ASSETS=(--assets "$GA_ASSETS")

[ -x "$GA" ] || cargo build --release -q -p graph-ascend

# one LABEL FILE: the report written (time, peak memory, size), then its first paint.
one() {
  local label=$1 file=$2 out="$TMP/$1.html"
  rm -f "$out"
  /usr/bin/time -o "$TMP/$label.time" -f '%e s (CPU %U s user + %S s system), peak %M KB' nice -n 10 "$GA" report "$file" -o "$out" "${ASSETS[@]}" 2>"$TMP/$label.log"
  echo "$label: written in $(cat "$TMP/$label.time"); $(stat -c %s "$out" | awk '{printf "%.2f MB", $1 / 1e6}')"
  sed 's/^/    /' "$TMP/$label.log"
  node bench/report_paint.mjs "$out" | sed "s/^/    /"
}

one demo examples/compare_tf_stats/compare_20261122090320.vis.db

if [ -f "$BIG_DIR/big_stats_a.tar.xz" ]; then
  mkdir -p "$TMP/big"
  tar xJf "$BIG_DIR/big_stats_a.tar.xz" -C "$TMP/big"
  tar xJf "$BIG_DIR/big_stats_b.tar.xz" -C "$TMP/big"
  A=$(find "$TMP/big/big_stats_a/step0" -mindepth 1 -maxdepth 1 -type d | head -1)
  B=$(find "$TMP/big/big_stats_b/step0" -mindepth 1 -maxdepth 1 -type d | head -1)
  "$GA" convert -tp "$B" -gp "$A" -o "$TMP/big_out" >/dev/null
  one 48-layer-pair "$(ls "$TMP"/big_out/*.vis.db | head -1)"
  rm -rf "$TMP/big" "$TMP/big_out"
  size=$(stat -c %s "$TMP/48-layer-pair.html")
  [ "$size" -le 10000000 ] || { echo "48-layer pair: the report is over 10 MB ($size bytes)"; exit 1; }
else
  echo "48-layer pair: $BIG_DIR/big_stats_{a,b}.tar.xz not found, skipped"
fi

if [ -n "${BENCH_REPORT_1M:-}" ]; then
  one synthetic-1M "$BENCH_REPORT_1M"
elif [ "$NODES" -gt 0 ]; then
  cargo build --release -q -p graph-ascend-testkit --bin gen_visdb
  nice -n 10 target/release/gen_visdb --nodes "$NODES" --out "$TMP/synthetic.vis.db" >/dev/null
  one "synthetic-$NODES" "$TMP/synthetic.vis.db"
  rm -f "$TMP/synthetic.vis.db"
fi

if [ "$DUMP_ENTRIES" -gt 0 ]; then
  cargo build --release -q -p graph-ascend-testkit --bin gen_dump
  nice -n 10 target/release/gen_dump "$TMP/dump_a" "$DUMP_ENTRIES" >/dev/null
  nice -n 10 target/release/gen_dump "$TMP/dump_b" "$DUMP_ENTRIES" --perturb >/dev/null
  nice -n 10 "$GA" convert -tp "$TMP/dump_b/step0/rank0" -gp "$TMP/dump_a/step0/rank0" -o "$TMP/dump_out" >/dev/null
  rm -rf "$TMP/dump_a" "$TMP/dump_b"
  echo "load before: $(cut -d' ' -f1-3 /proc/loadavg)"
  one "gen_dump-$DUMP_ENTRIES" "$(ls "$TMP"/dump_out/*.vis.db | head -1)"
  echo "load after: $(cut -d' ' -f1-3 /proc/loadavg)"
  rm -rf "$TMP/dump_out"
fi
