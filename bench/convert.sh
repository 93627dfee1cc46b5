#!/usr/bin/env bash
# Converter benchmark (not a test): wall time and peak memory of `graph-ascend convert`.
#
# 1. The real 20,758-entry pair (BIG_DIR, by default ../shared/fixtures/big beside the
#    repository, when present): build, compare, and a TP 2 merge with the two sides as two ranks.
# 2. Synthetic dumps from `gen_dump` (the test-support crate's) at growing sizes (BENCH_SIZES, default 20k 100k 300k
#    entries a side; add 1000000 for the 1M point): how time and memory grow with size.
#
# When msprobe can run here (MSPROBE_DIR: an unpacked msprobe 26.2 package, default the one the
# shim tests unpack into tests/artifacts/shim; MSPROBE_DEPS: extra PYTHONPATH, e.g. for psutil),
# the real pair is also converted by msprobe, side by side, and the ratios are printed: this
# machine's speed varies from hour to hour, so only same-minute ratios mean much.
#
# Env: GA (binary, default target/release/graph-ascend), BIG_DIR (folder with
# big_stats_{a,b}.tar.xz), BENCH_SIZES, BENCH_TMP, BENCH_OUT (folder for the printed results,
# default bench/results), MSPROBE_DIR, MSPROBE_DEPS, PYTHON, OURS_RUNS, MSPROBE_RUNS.
#
# Headline figures (bench/headline.py): the compare's speed and peak memory against msprobe's.
set -euo pipefail
# Paths given relative to the caller's folder stay valid after the cd below.
[ -n "${BIG_DIR:-}" ] && BIG_DIR=$(realpath -m -- "$BIG_DIR")
[ -n "${BENCH_OUT:-}" ] && BENCH_OUT=$(realpath -m -- "$BENCH_OUT")
cd "$(dirname "$0")/.."
GA=${GA:-target/release/graph-ascend}
BIG_DIR=${BIG_DIR:-$(realpath -m -- ../shared/fixtures/big)}
OUT=${BENCH_OUT:-bench/results}
mkdir -p "$OUT"
exec > >(tee "$OUT/convert.txt") 2>&1
SIZES=${BENCH_SIZES:-"20000 100000 300000"}
TMP=${BENCH_TMP:-$(mktemp -d)}
trap 'rm -rf "$TMP"' EXIT

cargo build --release -q -p graph-ascend-testkit --bin gen_dump
GEN=target/release/gen_dump
[ -x "$GA" ] || cargo build --release -q -p graph-ascend

measure() { # label, then the command; prints "label  wall_s  peak_MB", sets WALL and KB
  local label=$1; shift
  /usr/bin/time -o "$TMP/time" -f "%e %M" "$@" >/dev/null 2>"$TMP/err" || {
    echo "$label: FAILED"; cat "$TMP/err"; return 1; }
  read -r WALL KB <"$TMP/time"
  printf "%-28s %8.2f s %8.0f MB\n" "$label" "$WALL" "$((KB / 1024))"
}

best_of() { # n label command...: the run with the least wall time of n
  local n=$1 label=$2; shift 2
  local best_wall="" best_kb=""
  for _ in $(seq "$n"); do
    rm -rf "$TMP/out"
    measure "$label" "$@" >/dev/null
    if [ -z "$best_wall" ] || awk "BEGIN{exit !($WALL < $best_wall)}"; then
      best_wall=$WALL; best_kb=$KB
    fi
  done
  WALL=$best_wall; KB=$best_kb
  printf "%-28s %8.2f s %8.0f MB  (best of %s)\n" "$label" "$WALL" "$((KB / 1024))" "$n"
}

# Each side's best run counts (this machine's speed wanders by tens of percent from one run to
# the next): ours of OURS_RUNS (default 5), msprobe's of MSPROBE_RUNS (default 2).
OURS_RUNS=${OURS_RUNS:-5}
MSPROBE_RUNS=${MSPROBE_RUNS:-2}
MSPROBE_DIR=${MSPROBE_DIR:-tests/artifacts/shim/msprobe-26.2.0-py311}
PYTHON=${PYTHON:-$( [ -x .venv/bin/python ] && echo .venv/bin/python || echo python3 )}
msprobe_ok() {
  [ -f "$MSPROBE_DIR/bin/msprobe" ] &&
    PYTHONPATH="$MSPROBE_DIR:${MSPROBE_DEPS:-}" "$PYTHON" -c "import msprobe, psutil" 2>/dev/null
}
MSPROBE_RUN=(env "PYTHONPATH=$MSPROBE_DIR:${MSPROBE_DEPS:-}" "$PYTHON" "$MSPROBE_DIR/bin/msprobe"
  graph_visualize)

headline() { python3 bench/headline.py "$@"; }

echo "== graph-ascend convert benchmark ($(nproc) cores, load $(cut -d' ' -f1 /proc/loadavg))"
if [ -f "$BIG_DIR/big_stats_a.tar.xz" ]; then
  mkdir -p "$TMP/big"
  tar xJf "$BIG_DIR/big_stats_a.tar.xz" -C "$TMP/big"
  tar xJf "$BIG_DIR/big_stats_b.tar.xz" -C "$TMP/big"
  A=$(ls -d "$TMP"/big/big_stats_a/step0/*/)
  B=$(ls -d "$TMP"/big/big_stats_b/step0/*/)
  echo "-- real dumps, 20,758 entries a side ($BIG_DIR)"
  best_of "$OURS_RUNS" "big build" "$GA" convert -tp "$A" -o "$TMP/out"
  OURS_BUILD=$WALL; OURS_BUILD_KB=$KB
  best_of "$OURS_RUNS" "big compare" "$GA" convert -tp "$B" -gp "$A" -o "$TMP/out"
  OURS_COMPARE=$WALL; OURS_COMPARE_KB=$KB; OURS_LOAD=$(cut -d' ' -f1 /proc/loadavg)
  rm -rf "$TMP/out"
  # The two sides as the two ranks of one TP 2 run (a parallel merge of the real dumps).
  mkdir -p "$TMP/merge/step0"
  cp -r "$A" "$TMP/merge/step0/rank0"
  cp -r "$B" "$TMP/merge/step0/rank1"
  best_of "$OURS_RUNS" "big TP 2 merge" "$GA" convert -tp "$TMP/merge/step0" -o "$TMP/out" \
    --rank_size 2 --tp 2 --pp 1
  rm -rf "$TMP/out" "$TMP/merge"
  if msprobe_ok; then
    echo "-- msprobe 26.2 side by side ($MSPROBE_DIR)"
    best_of "$MSPROBE_RUNS" "msprobe big build" "${MSPROBE_RUN[@]}" -tp "$A" -o "$TMP/out"
    awk -v m="$WALL" -v o="$OURS_BUILD" -v mk="$KB" -v ok="$OURS_BUILD_KB" \
      'BEGIN{printf "   build:   %.1fx faster, %.0f%% of its memory\n", m/o, 100*ok/mk}'
    best_of "$MSPROBE_RUNS" "msprobe big compare" "${MSPROBE_RUN[@]}" -tp "$B" -gp "$A" -o "$TMP/out"
    awk -v m="$WALL" -v o="$OURS_COMPARE" -v mk="$KB" -v ok="$OURS_COMPARE_KB" \
      'BEGIN{printf "   compare: %.1fx faster, %.0f%% of its memory\n", m/o, 100*ok/mk}'
    headline add convert_ratio "$(awk -v m="$WALL" -v o="$OURS_COMPARE" 'BEGIN{print m/o}')" "×" \
      --vs "msprobe $WALL s, ours $OURS_COMPARE s at load $OURS_LOAD (best of $MSPROBE_RUNS and $OURS_RUNS)"
    headline add convert_memory "$(awk -v mk="$KB" -v ok="$OURS_COMPARE_KB" 'BEGIN{print mk/ok}')" "× less" \
      --vs "msprobe $((KB / 1024)) MB, ours $((OURS_COMPARE_KB / 1024)) MB"
    rm -rf "$TMP/out"
  else
    echo "-- msprobe not runnable here (MSPROBE_DIR=$MSPROBE_DIR): no side-by-side run"
    # Ours alone: no ratio, but a change that slows ours still shows.
    headline add convert_ratio "$OURS_COMPARE" s --vs "not measured: msprobe not runnable (MSPROBE_DIR=$MSPROBE_DIR)" \
      --workload "\`convert\` of the 48-layer pair (compare), ours alone: wall (best of $OURS_RUNS)"
    headline add convert_memory "$((OURS_COMPARE_KB / 1024))" MB \
      --vs "not measured: msprobe not runnable (MSPROBE_DIR=$MSPROBE_DIR)" \
      --workload "\`convert\` of the 48-layer pair (compare), ours alone: peak memory"
  fi
else
  echo "-- $BIG_DIR not found: skipping the real pair"
  headline skip convert_ratio convert_memory --why "the 48-layer pair not found ($BIG_DIR)"
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
