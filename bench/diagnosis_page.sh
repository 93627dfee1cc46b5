#!/usr/bin/env bash
# The Diagnosis panel's first answer in the page (not a test): a compare of about BENCH_DIAG_NODES
# nodes a side (default 1,000,000; `gen_visdb`, as bench/diagnose.sh makes it, or SYNTHETIC=FILE, a
# file of ours already written, linked read-only), served in real TensorBoard with the real sidecar,
# opened in headless Chromium (bench/diagnosis_page.mjs): from opening the file to the graph drawn and
# to the panel's list drawn (a link naming the panel; a click on the panel once the graph is drawn; the
# colour mode "where the error is introduced", with its verdicts), the median of RUNS runs (each a fresh
# TensorBoard and sidecar: nothing cached), the sidecar's CPU time and peak memory, the load average.
# Then the same file in msprobe's shape (our objects dropped, on a copy). Target: the list ≤ 3 s after
# opening the file, on a quiet machine. The page served is this checkout's (built here, served through
# GRAPH_ASCEND_STATIC_DIR), not the one installed in PYTHON's environment, which may be older.
#
# Env: GA (binary, default target/release/graph-ascend), BENCH_DIAG_NODES, SYNTHETIC, RUNS (default 3),
# WAYS (default panel,click,colours), SHAPES (default ours,msprobe; `ours` skips the copy in msprobe's
# shape), PYTHON (with tensorboard and the shim, default .venv/bin/python), GRAPH_ASCEND_STATIC_DIR (the
# page to serve, default this checkout's, built), BENCH_TMP (work folder, default a temporary one;
# removed at the end either way), BENCH_OUT (folder of diagnosis_page.txt, default bench/results).
#
# Headline figures (bench/headline.py), our shape: the first graph and the panel's list (medians of the
# first way of WAYS). Expanding a block and a click on a Diagnosis line are not timed here (said so in the
# closing table).
set -euo pipefail
[ -n "${BENCH_OUT:-}" ] && BENCH_OUT=$(realpath -m -- "$BENCH_OUT")
[ -n "${SYNTHETIC:-}" ] && SYNTHETIC=$(realpath -m -- "$SYNTHETIC")
cd "$(dirname "$0")/.."
GA=${GA:-target/release/graph-ascend}
NODES=${BENCH_DIAG_NODES:-1000000}
RUNS=${RUNS:-3}
WAYS=${WAYS:-panel,click,colours}
SHAPES=${SHAPES:-ours,msprobe}
PYTHON=${PYTHON:-.venv/bin/python}
OUT=${BENCH_OUT:-bench/results}
mkdir -p "$OUT"
exec > >(tee "$OUT/diagnosis_page.txt") 2>&1
TMP=${BENCH_TMP:-$(mktemp -d)}
mkdir -p "$TMP"
trap 'rm -rf "$TMP"' EXIT

[ -x "$GA" ] || cargo build --release -q --locked -p graph-ascend
GA=$(realpath "$GA")
case $PYTHON in /*) ;; *) PYTHON=$PWD/$PYTHON ;; esac
# The page of this checkout: an environment installed earlier serves the page of its own day.
if [ -z "${GRAPH_ASCEND_STATIC_DIR:-}" ]; then
  (cd frontend && npm run --silent build >/dev/null)
  export GRAPH_ASCEND_STATIC_DIR=$PWD/python_shim/graph_ascend_tb/static
fi

echo "== the Diagnosis panel's first answer in the page ($(nproc) cores, load $(cut -d' ' -f1-3 /proc/loadavg))"
echo "page: $GRAPH_ASCEND_STATIC_DIR ($(cd "$GRAPH_ASCEND_STATIC_DIR/assets" && ls app-*.js))"
mkdir -p "$TMP/ours/run" "$TMP/msprobe/run"
if [ -n "${SYNTHETIC:-}" ]; then
  # read only: a hard link (a symbolic one where the file is on another file system)
  ln -- "$SYNTHETIC" "$TMP/ours/run/ours.vis.db" 2>/dev/null || ln -s -- "$SYNTHETIC" "$TMP/ours/run/ours.vis.db"
else
  cargo build --release -q --locked -p graph-ascend-testkit --bin gen_visdb
  target/release/gen_visdb --nodes "$NODES" --out "$TMP/ours/run/ours.vis.db" >/dev/null
fi
# the file in the page cache, as a user's recent file is
cat -- "$TMP/ours/run/ours.vis.db" >/dev/null
echo "ours ($NODES nodes a side, with our index and diagnosis table):"
GRAPH_ASCEND_BINARY=$GA GA_PYTHON=$PYTHON node bench/diagnosis_page.mjs "$TMP/ours" run ours "$RUNS" "$WAYS" | tee "$TMP/ours.jsonl"
# the first way's medians: graph and list (ms), the sidecar's peak (MB), the load after
read -r WAY GRAPH_MS LIST_MS PEAK_MB LOAD1 < <(python3 -c '
import json, sys
for text in open(sys.argv[1]):
    if text.startswith("{") and json.loads(text).get("name") == "diagnosis_page":
        m = json.loads(text)
        print(m["way"], m["graph_ms"], m["list_ms"], m["sidecar_peak_mb"], m["load_after"].split()[0])
        break
' "$TMP/ours.jsonl")
WORDS="the page on ${SYNTHETIC:-a \`gen_visdb --nodes $NODES\` compare} (our shape), opened as \`$WAY\`, median of $RUNS fresh starts"
# judged on the goal's 1M nodes a side or on a file given; smaller ones are not judged
JUDGE=auto
if [ -z "${SYNTHETIC:-}" ] && [ "$NODES" -lt 1000000 ]; then JUDGE=null; WORDS+=" (smaller than the goal's 1M: not judged)"; fi
python3 bench/headline.py add page_1m_graph "$(awk -v m="$GRAPH_MS" 'BEGIN{print m / 1000}')" s --met "$JUDGE" --load "$LOAD1" \
  --workload "$WORDS: first graph, from opening the file" --vs "sidecar peak $PEAK_MB MB"
python3 bench/headline.py add page_1m_diagnosis_list "$(awk -v m="$LIST_MS" 'BEGIN{print m / 1000}')" s --met "$JUDGE" --load "$LOAD1" \
  --workload "$WORDS: the Diagnosis panel's list, from opening the file" --vs "sidecar peak $PEAK_MB MB"
python3 bench/headline.py skip page_1m_expand page_1m_diagnosis_click \
  --why "no bench times it yet (bench/diagnosis_page.mjs times the first graph and the panel's list)"
if [[ ,$SHAPES, != *,msprobe,* ]]; then
  echo "load average at the end: $(cut -d' ' -f1-3 /proc/loadavg)"
  exit 0
fi
# msprobe's shape: a copy without our objects (the original may be read only)
cp --reflink=auto -- "$TMP/ours/run/ours.vis.db" "$TMP/msprobe/run/msprobe.vis.db"
rm -f -- "$TMP/ours/run/ours.vis.db"
python3 -c 'import sqlite3,sys; c=sqlite3.connect(sys.argv[1]); c.executescript("DROP TABLE IF EXISTS ga_diagnosis; DROP INDEX IF EXISTS ga_node_list;"); c.commit()' "$TMP/msprobe/run/msprobe.vis.db"
cat -- "$TMP/msprobe/run/msprobe.vis.db" >/dev/null
echo "msprobe's shape (the same file without our objects):"
GRAPH_ASCEND_BINARY=$GA GA_PYTHON=$PYTHON node bench/diagnosis_page.mjs "$TMP/msprobe" run msprobe "$RUNS" "$WAYS"
echo "load average at the end: $(cut -d' ' -f1-3 /proc/loadavg)"
