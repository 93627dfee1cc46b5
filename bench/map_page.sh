#!/usr/bin/env bash
# The divergence map in the page (not a test): a synthetic compare of MAP_RANKS ranks x MAP_STEPS steps
# (`gen_dump` shapes, as bench/scale.sh makes them, MAP_ENTRIES entries a rank and side; one step converted
# with `graph-ascend convert`, then copied to the other steps in the file by `copy_steps`), served in real TensorBoard, the Map panel opened in headless Chromium
# (bench/map_page.mjs): time to first paint and to the whole map, frames per second while scrolling (zoom 1
# and x8), the sidecar's peak memory. The map of such a file is computed on first use (no table of our own in
# the file): the first paint is the steps judged so far, as they come.
# MAP_CONVERT_ALL=1 generates every step's dumps and converts them all instead: the file as `convert` writes
# it, our `ga_diagnosis` table for every step included (the dumps of all steps on disk at once).
#
# `make bench` runs MAP_RANKS=1024 MAP_STEPS=10 MAP_ENTRIES=20 (some 40 nodes a graph); the issue's shape
# (about 1,000 nodes a graph) is MAP_ENTRIES=900 (tens of GB of dumps: run it where the disk allows).
#
# Env: GA (binary, default target/release/graph-ascend), MAP_RANKS, MAP_STEPS, MAP_ENTRIES, MAP_CONVERT_ALL, MAP_CPU_THROTTLE
# (also scroll with the page's CPU slowed that many times, e.g. 6), PYTHON (with
# tensorboard and the shim, default .venv/bin/python), BENCH_TMP (work folder, default a temporary one;
# removed at the end either way), BENCH_OUT (folder of map_page.txt, default bench/results).
#
# Headline figures (bench/headline.py), each shape: the first cells' time and the sidecar's peak after the
# first whole map.
set -euo pipefail
[ -n "${BENCH_OUT:-}" ] && BENCH_OUT=$(realpath -m -- "$BENCH_OUT")
cd "$(dirname "$0")/.."
# Built here unless given.
[ -n "${GA:-}" ] || { cargo build --release -q --locked -p graph-ascend; GA=target/release/graph-ascend; }
RANKS=${MAP_RANKS:-1024}
STEPS=${MAP_STEPS:-10}
ENTRIES=${MAP_ENTRIES:-20}
SHAPES=${MAP_SHAPES:-ours msprobe}
CONVERT_ALL=${MAP_CONVERT_ALL:-0}
PYTHON=${PYTHON:-.venv/bin/python}
OUT=${BENCH_OUT:-bench/results}
mkdir -p "$OUT"
exec > >(tee "$OUT/map_page.txt") 2>&1
TMP=${BENCH_TMP:-$(mktemp -d)}
mkdir -p "$TMP"
[ "${MAP_KEEP:-0}" = 1 ] || trap 'rm -rf "$TMP"' EXIT

GA=$(realpath "$GA")

now() { date +%s.%N; }
since() { awk "BEGIN{printf \"%.1f\", $(now) - $1}"; }
echo "== divergence map: $RANKS ranks x $STEPS steps x $ENTRIES entries a side ($(nproc) cores, load $(cut -d' ' -f1-3 /proc/loadavg))"
# One step is generated and converted, then copied to the other steps in the file (quicker to make: the
# dumps of one step only on disk); MAP_CONVERT_ALL=1 converts every step.
BASE="$TMP/base-$RANKS-$STEPS-$ENTRIES-$CONVERT_ALL.vis.db"
if [ ! -f "$BASE" ] && [ "$CONVERT_ALL" = 1 ]; then
  cargo build --release -q --locked -p graph-ascend-testkit --bin gen_dump
  t=$(now)
  target/release/gen_dump "$TMP/dumps/a" "$ENTRIES" --ranks "$RANKS" --steps "$STEPS" >/dev/null
  target/release/gen_dump "$TMP/dumps/b" "$ENTRIES" --ranks "$RANKS" --steps "$STEPS" --perturb >/dev/null
  echo "generate dumps   $(since "$t") s ($(du -sh "$TMP/dumps" | cut -f1), $STEPS steps)"
  rm -rf "$TMP/convert"
  /usr/bin/time -f "convert          %e s, peak %M kB (all steps)" "$GA" convert -tp "$TMP/dumps/b" -gp "$TMP/dumps/a" -o "$TMP/convert" >/dev/null
  rm -rf "$TMP/dumps"
  mv "$(ls "$TMP"/convert/*.vis.db)" "$BASE"
  rm -rf "$TMP/convert"
  echo "converted        $(du -h "$BASE" | cut -f1): $(sqlite3 "$BASE" 'select count(*) from tb_nodes') rows, $(sqlite3 "$BASE" 'select count(*) from ga_diagnosis') of ga_diagnosis"
fi
if [ ! -f "$BASE" ]; then
  cargo build --release -q --locked -p graph-ascend-testkit --bin gen_dump --bin copy_steps
  t=$(now)
  target/release/gen_dump "$TMP/dumps/a" "$ENTRIES" --ranks "$RANKS" >/dev/null
  target/release/gen_dump "$TMP/dumps/b" "$ENTRIES" --ranks "$RANKS" --perturb >/dev/null
  echo "generate dumps   $(since "$t") s ($(du -sh "$TMP/dumps" | cut -f1))"
  rm -rf "$TMP/convert"
  /usr/bin/time -f "convert          %e s, peak %M kB (one step)" "$GA" convert -tp "$TMP/dumps/b" -gp "$TMP/dumps/a" -o "$TMP/convert" >/dev/null
  rm -rf "$TMP/dumps"
  t=$(now)
  target/release/copy_steps "$(ls "$TMP"/convert/*.vis.db)" "$STEPS"
  mv "$(ls "$TMP"/convert/*.vis.db)" "$BASE"
  rm -rf "$TMP/convert"
  echo "steps copied     $(since "$t") s: $(du -h "$BASE" | cut -f1), $(sqlite3 "$BASE" 'select count(*) from tb_nodes') rows"
fi
case $PYTHON in /*) ;; *) PYTHON=$PWD/$PYTHON ;; esac
for shape in $SHAPES; do
  rm -rf "$TMP/logdir"
  mkdir -p "$TMP/logdir/map"
  DB="$TMP/logdir/map/map.vis.db"
  # Ours is served as converted: a hard link, not a copy (no reflink on ext4: a copy of a file of
  # some GB doubles the disk it takes); msprobe's shape is a copy with our objects dropped.
  case $shape in
    ours) ln "$BASE" "$DB" ;;
    msprobe) cp --reflink=auto "$BASE" "$DB"
      sqlite3 "$DB" "DROP TABLE IF EXISTS ga_diagnosis; DROP INDEX IF EXISTS ga_node_list;" ;;
    *) echo "MAP_SHAPES: unknown shape $shape (ours, msprobe)"; exit 2 ;;
  esac
  echo "-- $shape's shape (load $(cut -d' ' -f1-3 /proc/loadavg))"
  /usr/bin/time -f "diagnose --map   %e s wall, %U s user + %S s system, peak %M kB (CLI, fresh process)" "$GA" diagnose "$DB" --map --format json >/dev/null || true
  GRAPH_ASCEND_BINARY=$GA GA_PYTHON=$PYTHON node bench/map_page.mjs "$TMP/logdir" | tee "$TMP/map.jsonl"
  # the first opening's line: first cells (ms), the sidecar's peak before and after the map, the load
  read -r CELLS_MS PEAK_MB BEFORE_MB LOAD1 < <(python3 -c '
import json, sys
for text in open(sys.argv[1]):
    if text.startswith("{") and json.loads(text).get("name") == "map_first_paint":
        m = json.loads(text)
        print(m["first_cells_ms"], m["sidecar_peak_after_map_mb"], m["sidecar_peak_before_map_mb"], m["load"].split()[0])
' "$TMP/map.jsonl")
  WORDS="the divergence map in the page, $([ "$shape" = ours ] && echo our || echo "msprobe's") shape"
  WORDS+=" ($RANKS ranks × $STEPS steps × $ENTRIES entries a side"
  # judged at the goal's shape only (1,024 ranks x 10 steps x ~905 nodes a graph: MAP_ENTRIES=900)
  JUDGE=auto
  if [ "$RANKS" -ge 1024 ] && [ "$STEPS" -ge 10 ] && [ "$ENTRIES" -ge 900 ]; then WORDS+=")"
  else JUDGE=null; WORDS+="; smaller than the goal's 1,024 × 10 × 900: not judged)"; fi
  python3 bench/headline.py add "map_paint_$shape" "$(awk -v m="$CELLS_MS" 'BEGIN{print m / 1000}')" s \
    --met "$JUDGE" --load "$LOAD1" --workload "$WORDS: first cells, from the click" --vs "– (msprobe has no map)"
  python3 bench/headline.py add "map_memory_$shape" "$PEAK_MB" MB --met "$JUDGE" --load "$LOAD1" \
    --workload "$WORDS: sidecar peak after the first whole map" --vs "sidecar before the map: $BEFORE_MB MB"
  rm -rf "$TMP/logdir"
done
