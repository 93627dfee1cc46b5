#!/usr/bin/env bash
# Scale simulation (not a test; issue 16): synthetic dumps of many ranks converted as shards in
# separate processes (as a job array runs them), gathered, then served in real TensorBoard.
# Prints the time of each stage, the peak memory of each shard, of the gather and of the sidecar.
#
# `make bench` runs a small version (SCALE_RANKS=128, SCALE_SHARDS=4); the figures in
# docs/scale.md are of the full one:
#   SCALE_RANKS=1024 SCALE_SHARDS=16 SCALE_ENTRIES=450 bash bench/scale.sh
#
# Env: GA (binary, default target/release/graph-ascend), SCALE_RANKS, SCALE_SHARDS,
# SCALE_ENTRIES (entries per rank and side, default 90), SCALE_JOBS (shards run at once, default
# the cores: a cluster runs them all at once on as many nodes), SCALE_CHECK (1: also convert
# unsharded and diff-visdb the two, default 1), PYTHON (with tensorboard and the shim, default
# .venv/bin/python; the serve stage is skipped without it), BENCH_TMP, BENCH_OUT.
set -euo pipefail
[ -n "${BENCH_OUT:-}" ] && BENCH_OUT=$(realpath -m -- "$BENCH_OUT")
cd "$(dirname "$0")/.."
GA=${GA:-target/release/graph-ascend}
RANKS=${SCALE_RANKS:-128}
SHARDS=${SCALE_SHARDS:-4}
ENTRIES=${SCALE_ENTRIES:-90}
JOBS=${SCALE_JOBS:-$(nproc)}
CHECK=${SCALE_CHECK:-1}
PYTHON=${PYTHON:-.venv/bin/python}
OUT=${BENCH_OUT:-bench/results}
mkdir -p "$OUT"
exec > >(tee "$OUT/scale.txt") 2>&1
TMP=${BENCH_TMP:-$(mktemp -d)}
trap 'rm -rf "$TMP"' EXIT

cargo build --release -q --locked -p graph-ascend-convert --bin gen_dump
cargo build --release -q --locked -p graph-ascend
GEN=target/release/gen_dump
GA=$(realpath "$GA")

now() { date +%s.%N; }
since() { awk "BEGIN{printf \"%.1f\", $(now) - $1}"; }

echo "== scale simulation: $RANKS ranks x $ENTRIES entries a side (compare), $SHARDS shards," \
  "$JOBS at once ($(nproc) cores, load $(cut -d' ' -f1 /proc/loadavg))"
t=$(now)
"$GEN" "$TMP/dumps/a" "$ENTRIES" --ranks "$RANKS" >/dev/null
"$GEN" "$TMP/dumps/b" "$ENTRIES" --ranks "$RANKS" --perturb >/dev/null
echo "generate dumps          $(since "$t") s   ($(du -sh "$TMP/dumps" | cut -f1))"

# The shards, each in its own process, at most JOBS at once; per shard: wall time, peak RSS.
mkdir -p "$TMP/times"
t=$(now)
seq 0 $((SHARDS - 1)) | xargs -P "$JOBS" -I{} /usr/bin/time -o "$TMP/times/{}" -f "%e %M" \
  "$GA" convert -tp "$TMP/dumps/b" -gp "$TMP/dumps/a" -o "$TMP/parts" --shard "{}/$SHARDS" >/dev/null
CONVERT_WALL=$(since "$t")
sort -n -k2 "$TMP"/times/* | awk -v n="$SHARDS" -v all="$CONVERT_WALL" '
  { wall[NR] = $1; kb[NR] = $2; sum += $1; if ($1 > max) max = $1 }
  END { printf "convert %d shards      %s s in all; per shard: mean %.1f s, max %.1f s; peak memory min %d / median %d / max %d MB\n",
        n, all, sum / NR, max, kb[1] / 1024, kb[int((NR + 1) / 2)] / 1024, kb[NR] / 1024 }'
echo "parts                   $(ls "$TMP/parts" | wc -l) files, $(du -sh "$TMP/parts" | cut -f1)"

/usr/bin/time -o "$TMP/gather.time" -f "%e %M" "$GA" gather "$TMP/parts" -o "$TMP/logdir/run/gathered.vis.db" >/dev/null
read -r W KB <"$TMP/gather.time"
echo "gather                  $W s, peak memory $((KB / 1024)) MB ($(du -h "$TMP/logdir/run/gathered.vis.db" | cut -f1))"

if [ "$CHECK" = 1 ]; then
  /usr/bin/time -o "$TMP/whole.time" -f "%e %M" "$GA" convert -tp "$TMP/dumps/b" -gp "$TMP/dumps/a" -o "$TMP/whole" >/dev/null
  read -r W KB <"$TMP/whole.time"
  echo "unsharded, for scale    $W s, peak memory $((KB / 1024)) MB (one process)"
  { "$GA" diff-visdb "$TMP"/whole/*.vis.db "$TMP/logdir/run/gathered.vis.db" 2>&1 || echo "FAILED"; } |
    sed 's/^/diff-visdb              /'
  rm -rf "$TMP/whole"
fi

if "$PYTHON" -c 'import tensorboard, graph_ascend_tb' 2>/dev/null; then
  echo "-- served (real TensorBoard, our sidecar $GA)"
  GRAPH_ASCEND_BINARY=$GA "$PYTHON" bench/scale_serve.py --logdir "$TMP/logdir" --last-rank $((RANKS - 1))
else
  echo "-- serve stage skipped: $PYTHON lacks tensorboard or graph_ascend_tb (make venv)"
fi
