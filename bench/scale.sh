#!/usr/bin/env bash
# Scale simulation (not a test): synthetic dumps of many ranks converted as shards in
# separate processes (as a job array runs them), gathered, then served in real TensorBoard.
# Prints each stage as it ends (each shard as it finishes), then a table of every stage's time
# and peak memory (the shards', the gather's, the sidecar's) in the form of docs/scale.md.
#
# `make bench` runs a small version (SCALE_RANKS=128, SCALE_SHARDS=4); the figures in
# docs/scale.md are of the full one (about 11 GB of disk at its peak: dumps, parts, the gathered
# file and the unsharded one; the parts are removed once gathered):
#   SCALE_RANKS=1024 SCALE_SHARDS=16 SCALE_ENTRIES=900 BENCH_TMP=/tmp/x nice -n 10 bash bench/scale.sh
#
# Env: GA (binary, default target/release/graph-ascend), SCALE_RANKS, SCALE_SHARDS,
# SCALE_ENTRIES (entries per rank and side, default 90), SCALE_JOBS (shards run at once, default
# the cores: a cluster runs them all at once on as many nodes), SCALE_CHECK (1: also convert
# unsharded and diff-visdb the two, default 1), SCALE_SERVE_ALL (1: the sidecar also lists the
# nodes of every rank's graph, each index built once under its memory bound, default 1),
# SCALE_INDEX_MB (that bound, `serve --max-index-memory-mb`; default the sidecar's own),
# PYTHON (with tensorboard and the shim, default .venv/bin/python; the serve stage is skipped
# without it), BENCH_TMP (work folder, default a temporary one; removed at the end either way),
# BENCH_OUT (folder of scale.txt, the printed results, default bench/results).
set -euo pipefail
[ -n "${BENCH_OUT:-}" ] && BENCH_OUT=$(realpath -m -- "$BENCH_OUT")
cd "$(dirname "$0")/.."
GA=${GA:-target/release/graph-ascend}
RANKS=${SCALE_RANKS:-128}
SHARDS=${SCALE_SHARDS:-4}
ENTRIES=${SCALE_ENTRIES:-90}
JOBS=${SCALE_JOBS:-$(nproc)}
CHECK=${SCALE_CHECK:-1}
SERVE_ALL=${SCALE_SERVE_ALL:-1}
INDEX_MB=${SCALE_INDEX_MB:-}
PYTHON=${PYTHON:-.venv/bin/python}
OUT=${BENCH_OUT:-bench/results}
mkdir -p "$OUT"
exec > >(tee "$OUT/scale.txt") 2>&1
TMP=${BENCH_TMP:-$(mktemp -d)}
mkdir -p "$TMP"
trap 'rm -rf "$TMP"' EXIT

cargo build --release -q --locked -p graph-ascend-testkit --bin gen_dump
cargo build --release -q --locked -p graph-ascend
GEN=target/release/gen_dump
GA=$(realpath "$GA")

now() { date +%s.%N; }
since() { awk "BEGIN{printf \"%.1f\", $(now) - $1}"; }
load() { cut -d' ' -f1-3 /proc/loadavg; }
# One row of the summary table: stage, time, peak memory.
TABLE=$TMP/table.md
row() { printf '| %s | %s | %s |\n' "$1" "$2" "$3" >>"$TABLE"; }

echo "== scale simulation: $RANKS ranks x $ENTRIES entries a side (compare), $SHARDS shards," \
  "$JOBS at once ($(nproc) cores, load $(load)), work folder $TMP"
echo "-- generating dumps ($(date -u +%T))"
t=$(now)
"$GEN" "$TMP/dumps/a" "$ENTRIES" --ranks "$RANKS" >/dev/null
"$GEN" "$TMP/dumps/b" "$ENTRIES" --ranks "$RANKS" --perturb >/dev/null
W=$(since "$t")
DUMPS=$(du -sh "$TMP/dumps" | cut -f1)
echo "generate dumps          $W s   ($DUMPS)"
row "generate dumps ($DUMPS)" "$W s" "–"

# The shards, each in its own process, at most JOBS at once; per shard: wall time, peak RSS,
# printed as each one ends. A failed shard stops the run with its own error output.
mkdir -p "$TMP/times" "$TMP/logs"
run_shard() {
  local i=$1
  if ! /usr/bin/time -o "$TMP/times/$i" -f "%e %M" "$GA" convert -tp "$TMP/dumps/b" -gp "$TMP/dumps/a" \
    -o "$TMP/parts" --shard "$i/$SHARDS" >/dev/null 2>"$TMP/logs/$i"; then
    echo "shard $i/$SHARDS FAILED:" >&2
    cat "$TMP/logs/$i" >&2
    exit 255 # xargs stops at once
  fi
  local w kb
  read -r w kb <"$TMP/times/$i"
  printf '  shard %3d/%d done at %s: %7.1f s, peak %5d MB\n' "$i" "$SHARDS" "$(date -u +%T)" "$w" $((kb / 1024))
}
export -f run_shard
export GA TMP SHARDS
echo "-- converting $SHARDS shards, $JOBS at once ($(date -u +%T))"
t=$(now)
seq 0 $((SHARDS - 1)) | xargs -P "$JOBS" -I{} bash -c 'run_shard {}'
CONVERT_WALL=$(since "$t")
SHARD_STATS=$(sort -n -k2 "$TMP"/times/* | awk '
  { kb[NR] = $2; sum += $1; if ($1 > max) max = $1 }
  END { printf "%.1f %.1f %d %d %d", sum / NR, max, kb[1] / 1024, kb[int((NR + 1) / 2)] / 1024, kb[NR] / 1024 }')
read -r MEAN MAX KMIN KMED KMAX <<<"$SHARD_STATS"
echo "convert $SHARDS shards      $CONVERT_WALL s in all; per shard: mean $MEAN s, max $MAX s;" \
  "peak memory min $KMIN / median $KMED / max $KMAX MB (load $(load))"
PARTS="$(ls "$TMP/parts" | wc -l) files, $(du -sh "$TMP/parts" | cut -f1)"
echo "parts                   $PARTS"
row "$SHARDS shards, $JOBS at once" "$CONVERT_WALL s in all; per shard mean $MEAN s, max $MAX s" \
  "$KMIN–$KMAX MB per shard (median $KMED)"

echo "-- gathering ($(date -u +%T))"
/usr/bin/time -o "$TMP/gather.time" -f "%e %M" "$GA" gather "$TMP/parts" -o "$TMP/logdir/run/gathered.vis.db" >/dev/null
read -r W KB <"$TMP/gather.time"
SIZE=$(du -h "$TMP/logdir/run/gathered.vis.db" | cut -f1)
echo "gather                  $W s, peak memory $((KB / 1024)) MB ($SIZE; load $(load))"
row "gather ($PARTS of parts, a $SIZE \`.vis.db\`)" "$W s" "$((KB / 1024)) MB"
rm -rf "$TMP/parts" # gathered: only disk from here on

if [ "$CHECK" = 1 ]; then
  echo "-- converting unsharded, for comparison ($(date -u +%T))"
  /usr/bin/time -o "$TMP/whole.time" -f "%e %M" "$GA" convert -tp "$TMP/dumps/b" -gp "$TMP/dumps/a" -o "$TMP/whole" >/dev/null
  read -r W KB <"$TMP/whole.time"
  echo "unsharded, for scale    $W s, peak memory $((KB / 1024)) MB (one process; load $(load))"
  row "unsharded, one process, for comparison" "$W s" "$((KB / 1024)) MB"
  { "$GA" diff-visdb "$TMP"/whole/*.vis.db "$TMP/logdir/run/gathered.vis.db" 2>&1 || echo "FAILED"; } |
    sed 's/^/diff-visdb              /'
  rm -rf "$TMP/whole"
fi

if "$PYTHON" -c 'import tensorboard, graph_ascend_tb' 2>/dev/null; then
  echo "-- served (real TensorBoard, our sidecar $GA; $(date -u +%T))"
  SERVE_ARGS=(--logdir "$TMP/logdir" --last-rank $((RANKS - 1)) --table-row "$TABLE")
  [ "$SERVE_ALL" = 1 ] && SERVE_ARGS+=(--steps 1)
  [ -n "$INDEX_MB" ] && SERVE_ARGS+=(--max-index-memory-mb "$INDEX_MB")
  GRAPH_ASCEND_BINARY=$GA "$PYTHON" bench/scale_serve.py "${SERVE_ARGS[@]}"
else
  echo "-- serve stage skipped: $PYTHON lacks tensorboard or graph_ascend_tb (make venv)"
fi

echo
echo "== summary ($(date -u +%F), $RANKS ranks x $ENTRIES entries a side, $SHARDS shards; $(nproc) cores, load $(load))"
echo "| stage | time | peak memory |"
echo "|---|---|---|"
cat "$TABLE"
