#!/usr/bin/env bash
# Graph service benchmark (not a test): the GRAPH_ASCEND browser API timed in real TensorBoard.
#
# 1. compare_big: the real 25k-node-a-side pair (BIG_DIR, by default ../shared/fixtures/big beside
#    the repository, when present), converted by our converter; timed for ours and, when msprobe
#    26.2 is installed (MSPROBE), for msprobe's plugin in the same TensorBoard, side by side.
# 2. many_graphs: a file of 1,000 small graphs (10 steps x 100 ranks, gen_visdb); its first answers
#    and then the node lists of all 1,000 graphs, under a 4 MB index bound (MANY_GRAPHS=0 skips it).
# 3. synth_1m: a synthetic compare file of about 1M nodes (gen_visdb, ~490k a side); ours only
#    (msprobe's plugin needs minutes per request at this size).
#
# Each part runs in its own TensorBoard, so the sidecar's peak memory is per part.
#
# Env: GA (binary, default target/release/graph-ascend), BIG_DIR (folder with
# big_stats_{a,b}.tar.xz), MSPROBE (pip --target folder of mindstudio-probe 26.2.0 and its plugin
# deps; default tests/artifacts/shim/msprobe-26.2.0-py<ver>, which `make test-shim` installs), PYTHON (with tensorboard and our
# shim; default .venv/bin/python), REPEAT (steady-state rounds, default 20), STARTS (fresh starts per
# side for the first answers, default 5; bench/service_bench.py says how both sides are interleaved),
# SYNTH_NODES (per side, default 500000; 0 skips part 2),
# BENCH_TMP (work folder, default a temporary one, removed at the end), BENCH_OUT (folder for the
# result tables, default bench/results).
#
# Headline figures (bench/headline.py): compare_big's six first answers against the goal.
set -euo pipefail
# Paths given relative to the caller's folder stay valid after the cd below.
[ -n "${BIG_DIR:-}" ] && BIG_DIR=$(realpath -m -- "$BIG_DIR")
cd "$(dirname "$0")/.."
GA=${GA:-target/release/graph-ascend}
BIG_DIR=${BIG_DIR:-$(realpath -m -- ../shared/fixtures/big)}
PYTHON=${PYTHON:-.venv/bin/python}
REPEAT=${REPEAT:-20}
STARTS=${STARTS:-5}
SYNTH_NODES=${SYNTH_NODES:-500000}
OUT=${BENCH_OUT:-bench/results}
if [ -n "${BENCH_TMP:-}" ]; then
  TMP=$BENCH_TMP
  mkdir -p "$TMP"
else
  TMP=$(mktemp -d)
  trap 'rm -rf "$TMP"' EXIT
fi

# The binary, and the shim's copy of it (the plugin runs the package's bin/ unless told otherwise);
# the synthetic files' generator (the test-support crate's).
cargo build --release -q --locked -p graph-ascend
cargo build --release -q --locked -p graph-ascend-testkit --bin gen_visdb
GEN_VISDB=$(realpath -- target/release/gen_visdb)
GA=$(realpath -- "$GA")
export GRAPH_ASCEND_BINARY=$GA
if [ ! -x "$PYTHON" ]; then
  make -s venv
fi
if ! "$PYTHON" -c 'import tensorboard, graph_ascend_tb' 2>/dev/null; then
  echo "$PYTHON lacks tensorboard or graph_ascend_tb: run 'make venv shim' first" >&2
  exit 1
fi
PYVER=$("$PYTHON" -c 'import sys; print(f"{sys.version_info.major}{sys.version_info.minor}")')
MSPROBE=${MSPROBE:-tests/artifacts/shim/msprobe-26.2.0-py$PYVER}
mkdir -p "$OUT"

echo "== graph-ascend service benchmark ($(nproc) cores, load $(cut -d' ' -f1 /proc/loadavg), $REPEAT rounds, $STARTS fresh starts)"

# 1. compare_big, side by side with msprobe.
if [ -f "$BIG_DIR/big_stats_a.tar.xz" ] && [ -f "$BIG_DIR/big_stats_b.tar.xz" ]; then
  mkdir -p "$TMP/src" "$TMP/big/compare_big"
  tar xJf "$BIG_DIR/big_stats_a.tar.xz" -C "$TMP/src"
  tar xJf "$BIG_DIR/big_stats_b.tar.xz" -C "$TMP/src"
  A=$(ls -d "$TMP"/src/big_stats_a/step0/*/ | head -n1)
  B=$(ls -d "$TMP"/src/big_stats_b/step0/*/ | head -n1)
  "$GA" convert -tp "$B" -gp "$A" -o "$TMP/big/compare_big" >/dev/null
  rm -rf "$TMP/src"
  msprobe_args=()
  if [ -d "$MSPROBE/msprobe" ]; then
    msprobe_args=(--msprobe "$(cd "$MSPROBE" && pwd)" --msprobe-runs compare_big)
  else
    echo "-- msprobe 26.2 not found at $MSPROBE (set MSPROBE): timing ours only"
  fi
  echo "-- compare_big (25k nodes a side, real dumps)"
  "$PYTHON" bench/service_bench.py --logdir "$TMP/big" --repeat "$REPEAT" --starts "$STARTS" \
    --out "$OUT/service_compare_big.md" "${msprobe_args[@]}"
else
  echo "-- $BIG_DIR not found: skipping compare_big"
  python3 bench/headline.py skip first_node_list first_root_layout first_module_expansion first_pass_filter \
    first_error_filter first_matched_relations --why "the 48-layer pair not found ($BIG_DIR)"
fi

# 2. A file of 1,000 graphs: opening it reads one; the indexes of all stay under the bound.
if [ "${MANY_GRAPHS:-1}" != 0 ]; then
  mkdir -p "$TMP/many/many_graphs"
  "$GEN_VISDB" --single --nodes 200 --leaves 10 --steps 10 --ranks 100 \
    --out "$TMP/many/many_graphs/many.vis.db"
  echo "-- many_graphs (1,000 graphs of 112 nodes, synthetic; index bound 4 MB)"
  "$PYTHON" bench/scale_serve.py --logdir "$TMP/many" --last-rank 99 --steps 10 \
    --max-index-memory-mb 4
  rm -rf "$TMP/many"
fi

# 3. A synthetic 1M-node compare file, ours only.
[ "$SYNTH_NODES" -gt 0 ] || exit 0
mkdir -p "$TMP/synth/synth_1m"
"$GEN_VISDB" --nodes "$SYNTH_NODES" --out "$TMP/synth/synth_1m/synth.vis.db"
echo "-- synth_1m ($SYNTH_NODES nodes a side requested, synthetic)"
"$PYTHON" bench/service_bench.py --logdir "$TMP/synth" --repeat "$REPEAT" --starts "$STARTS" \
  --out "$OUT/service_synth_1m.md"
