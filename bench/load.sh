#!/usr/bin/env bash
# Load test (not a test): 20 and 100 concurrent clients through real TensorBoard with the plugin,
# LOAD_SECONDS each (default 30), on the real compare fixture compare_tf_stats (msprobe's own
# output). Reports requests, errors, p50/p99 latency and the peak memory of TensorBoard and the
# sidecar (bench/load.py).
#
# Env: GA (binary, default target/release/graph-ascend), PYTHON (with tensorboard and our shim;
# default .venv/bin/python), LOAD_CLIENTS (default 20,100), LOAD_SECONDS, BENCH_OUT (default
# bench/results).
set -euo pipefail
cd "$(dirname "$0")/.."
GA=${GA:-target/release/graph-ascend}
PYTHON=${PYTHON:-.venv/bin/python}
OUT=${BENCH_OUT:-bench/results}
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT

cargo build --release -q --locked -p graph-ascend
export GRAPH_ASCEND_BINARY=$PWD/$GA
if ! "$PYTHON" -c 'import tensorboard, graph_ascend_tb' 2>/dev/null; then
  echo "$PYTHON lacks tensorboard or graph_ascend_tb: run 'make venv' first" >&2
  exit 1
fi
mkdir -p "$TMP/logdir/compare" "$OUT"
"$PYTHON" - "$TMP/logdir/compare/compare.vis.db" <<'PY'
import lzma, shutil, sys
with lzma.open("tests/fixtures/upstream_vis/compare_tf_stats/compare_20261122090320.vis.db.xz") as src, \
        open(sys.argv[1], "wb") as dst:
    shutil.copyfileobj(src, dst)
PY
"$PYTHON" bench/load.py --logdir "$TMP/logdir" --clients "${LOAD_CLIENTS:-20,100}" \
  --seconds "${LOAD_SECONDS:-30}" --out "$OUT/load.md"
