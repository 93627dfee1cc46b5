#!/usr/bin/env bash
# Diagnosis benchmark (not a test): the time of the rules after load, and of the load itself.
#
# 1. The real 48-layer pair (BIG_DIR, by default ../shared/fixtures/big beside the repository, when present), converted to a compare .vis.db
#    with `graph-ascend convert`: target under 50 ms.
# 2. A synthetic compare of about BENCH_DIAG_NODES nodes a side (default 1,000,000) from
#    `gen_visdb` (the test-support crate's generator): target under 1 s after load.
#
# Each line: nodes, load time, the rules' best wall time of RUNS and their CPU time (all threads):
# on a shared machine the wall time includes waiting for a core. For each file, the sidecar's
# `diagnosis` route too (examples/diagnosis_bench.rs: first call, cached calls, with and without the
# node verdicts of the colour mode, and the memory it adds to the sidecar).
#
# Env: GA (binary, default target/release/graph-ascend), BIG_DIR, BENCH_DIAG_NODES, BENCH_TMP, RUNS.
set -euo pipefail
# Paths given relative to the caller's folder stay valid after the cd below.
[ -n "${BIG_DIR:-}" ] && BIG_DIR=$(realpath -m -- "$BIG_DIR")
cd "$(dirname "$0")/.."
GA=${GA:-target/release/graph-ascend}
BIG_DIR=${BIG_DIR:-$(realpath -m -- ../shared/fixtures/big)}
NODES=${BENCH_DIAG_NODES:-1000000}
RUNS=${RUNS:-5}
TMP=${BENCH_TMP:-$(mktemp -d)}
trap 'rm -rf "$TMP"' EXIT

cargo build --release -q -p graph-ascend-diagnose --example diagnose_bench
cargo build --release -q -p graph-ascend-service --example diagnosis_bench
cargo build --release -q -p graph-ascend-testkit --bin gen_visdb
GEN_VISDB=target/release/gen_visdb
BENCH=target/release/examples/diagnose_bench
ROUTE=target/release/examples/diagnosis_bench
[ -x "$GA" ] || cargo build --release -q -p graph-ascend

echo "== graph-ascend diagnose benchmark ($(nproc) cores, load $(cut -d' ' -f1 /proc/loadavg))"
if [ -f "$BIG_DIR/big_stats_a.tar.xz" ]; then
  mkdir -p "$TMP/big" "$TMP/big_out"
  tar xJf "$BIG_DIR/big_stats_a.tar.xz" -C "$TMP/big"
  tar xJf "$BIG_DIR/big_stats_b.tar.xz" -C "$TMP/big"
  A=$(ls -d "$TMP"/big/big_stats_a/step0/*/ | head -1)
  B=$(ls -d "$TMP"/big/big_stats_b/step0/*/ | head -1)
  "$GA" convert -tp "$B" -gp "$A" -o "$TMP/big_out" >/dev/null
  echo "48-layer pair (target < 50 ms):"
  "$BENCH" "$(ls "$TMP"/big_out/*.vis.db | head -1)" "$RUNS"
  echo "48-layer pair through the sidecar's diagnosis route:"
  "$ROUTE" "$TMP/big_out" "$RUNS"
else
  echo "48-layer pair: $BIG_DIR/big_stats_{a,b}.tar.xz not found, skipped"
fi
"$GEN_VISDB" --nodes "$NODES" --out "$TMP/synthetic.vis.db" >/dev/null
echo "synthetic compare, $NODES nodes a side (target < 1 s after load):"
/usr/bin/time -f "  (whole run: %e s, peak %M KB)" "$BENCH" "$TMP/synthetic.vis.db" "$RUNS"
mkdir -p "$TMP/synthetic_dir/run" && mv "$TMP/synthetic.vis.db" "$TMP/synthetic_dir/run/"
echo "synthetic compare through the sidecar's diagnosis route:"
"$ROUTE" "$TMP/synthetic_dir" "$RUNS"
