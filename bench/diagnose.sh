#!/usr/bin/env bash
# Diagnosis benchmark (not a test): `graph-ascend diagnose` end to end in a fresh process, the time
# of the rules after load, and of the load itself.
#
# 1. The real 48-layer pair (BIG_DIR, by default ../shared/fixtures/big beside the repository, when present), converted to a compare .vis.db
#    with `graph-ascend convert`: target no slower than 0.10 s end to end, rules under 50 ms.
# 2. A synthetic compare of about BENCH_DIAG_NODES nodes a side (default 1,000,000) from
#    `gen_visdb` (the test-support crate's generator), as we write it (with our own index and
#    diagnosis table), and the same file in msprobe's shape (our objects dropped, in place):
#    targets 2 s and 400 MB on ours, 5 s and 600 MB on msprobe's shape (fresh process, file in
#    the page cache). SYNTHETIC=FILE uses a file of ours already written instead (read only: it
#    is copied before our objects are dropped).
# 3. The compare users make: `gen_dump` a and `gen_dump` b `--perturb`, BENCH_DIAG_NODES entries a side,
#    converted by our `convert` (many differing nodes, many sources): targets 2 s and 400 MB end to end
#    (DIAG_CONVERTED=0 skips it; the dumps take some GB of disk at 1M until converted).
#
# End to end: `graph-ascend diagnose FILE` run RUNS times, each in a fresh process with the file in
# the page cache (read once before); printed: the median and range of the wall time, the median
# user and system CPU time, and the median peak resident memory (/usr/bin/time). With GA_BEFORE
# (another build of the binary, e.g. main's), the same for it, run alternately with GA, so that
# both see the same load. The load average is printed before and after: on a shared machine the
# wall time includes waiting for a core, the CPU times are what the work costs.
#
# Then, for each file: the load and the rules apart (examples/diagnose_bench.rs: the load's wall and
# CPU time, the rules' best of RUNS) and the sidecar's `diagnosis` route (examples/diagnosis_bench.rs:
# first call, cached calls, with and without the node verdicts of the colour mode, and the memory
# it adds to the sidecar).
#
# Env: GA (binary, default target/release/graph-ascend), GA_BEFORE, BIG_DIR, BENCH_DIAG_NODES,
# SYNTHETIC, DIAG_CONVERTED, BENCH_TMP, RUNS (default 5), BENCH_DIAG_PARTS (default "end-to-end parts":
# "end-to-end" alone skips the load/rules and route lines). Runs under `nice -n 10` when started
# by `make bench`.
#
# Headline figures (bench/headline.py): wall time and peak memory end to end, of the converted compare
# and of the gen_visdb one in both shapes.
set -euo pipefail
# Paths given relative to the caller's folder stay valid after the cd below.
[ -n "${BIG_DIR:-}" ] && BIG_DIR=$(realpath -m -- "$BIG_DIR")
[ -n "${GA_BEFORE:-}" ] && GA_BEFORE=$(realpath -m -- "$GA_BEFORE")
[ -n "${SYNTHETIC:-}" ] && SYNTHETIC=$(realpath -m -- "$SYNTHETIC")
cd "$(dirname "$0")/.."
GA=${GA:-target/release/graph-ascend}
BIG_DIR=${BIG_DIR:-$(realpath -m -- ../shared/fixtures/big)}
NODES=${BENCH_DIAG_NODES:-1000000}
RUNS=${RUNS:-5}
PARTS=${BENCH_DIAG_PARTS:-end-to-end parts}
TMP=${BENCH_TMP:-$(mktemp -d)}
trap 'rm -rf "$TMP"' EXIT

GEN_VISDB=target/release/gen_visdb
[ -n "${SYNTHETIC:-}" ] || cargo build --release -q -p graph-ascend-testkit --bin gen_visdb
BENCH=target/release/examples/diagnose_bench
ROUTE=target/release/examples/diagnosis_bench
if [[ $PARTS == *parts* ]]; then
  cargo build --release -q -p graph-ascend-diagnose --example diagnose_bench
  cargo build --release -q -p graph-ascend-service --example diagnosis_bench
fi
[ -x "$GA" ] || cargo build --release -q -p graph-ascend

load_average() { cut -d' ' -f1-3 /proc/loadavg; }

# median of the numbers on stdin
median() { sort -g | awk '{v[NR]=$1} END {if (NR) print v[int((NR+1)/2)]}'; }

# end_to_end LABEL FILE: RUNS fresh `diagnose` processes of GA (and GA_BEFORE, alternately); GA's
# medians left in E2E_WALL (s), E2E_MB, E2E_RANGE and E2E_CPU for the headline figures.
end_to_end() {
  local label=$1 file=$2 bin name i
  # written back first (a freshly written file's writeback would be timed too), then read into
  # the page cache
  sync -- "$file"
  cat -- "$file" >/dev/null
  local -A times=()
  for ((i = 0; i < RUNS; i++)); do
    for name in after ${GA_BEFORE:+before}; do
      bin=$GA
      [ "$name" = before ] && bin=$GA_BEFORE
      # wall user sys peak-KB; exit status 1 means "sources found", not a failure
      /usr/bin/time -o "$TMP/time" -f '%e %U %S %M' "$bin" diagnose "$file" >/dev/null 2>&1 || true
      times[$name]+="$(tail -1 "$TMP/time")"$'\n'
    done
  done
  for name in ${GA_BEFORE:+before} after; do
    local rows=${times[$name]}
    local col
    col() { printf '%s' "$rows" | awk -v c="$1" 'NF {print $c}'; }
    printf '  %-28s %-6s wall %6.2f s (%s–%s), user %5.2f s, sys %5.2f s, peak %4d MB  [median of %d]\n' \
      "$label" "$name" "$(col 1 | median)" "$(col 1 | sort -g | head -1)" "$(col 1 | sort -g | tail -1)" \
      "$(col 2 | median)" "$(col 3 | median)" "$(( $(col 4 | median) / 1024 ))" "$RUNS"
    if [ "$name" = after ]; then
      E2E_WALL=$(col 1 | median) E2E_MB=$(( $(col 4 | median) / 1024 ))
      E2E_RANGE="$(col 1 | sort -g | head -1)–$(col 1 | sort -g | tail -1) s"
      E2E_CPU="user $(col 2 | median) s + sys $(col 3 | median) s"
    fi
  done
}

# headline_diagnose KEY WORDS: the last end_to_end's medians as the headline rows of KEY (judged
# against the goal when JUDGE is auto: on the goal's 1M a side, or on a file given).
headline_diagnose() {
  local what="\`diagnose\` of $2, median of $RUNS fresh processes (file in the page cache)"
  python3 bench/headline.py add "diagnose_1m_$1_time" "$E2E_WALL" s --workload "$what: wall" --met "$JUDGE" \
    --vs "range $E2E_RANGE; CPU $E2E_CPU (msprobe has no diagnosis)"
  python3 bench/headline.py add "diagnose_1m_$1_memory" "$E2E_MB" MB --workload "$what: peak memory" \
    --met "$JUDGE" --vs "– (msprobe has no diagnosis)"
}

echo "== graph-ascend diagnose benchmark ($(nproc) cores, load average $(load_average))"
if [ -f "$BIG_DIR/big_stats_a.tar.xz" ]; then
  mkdir -p "$TMP/big" "$TMP/big_out"
  tar xJf "$BIG_DIR/big_stats_a.tar.xz" -C "$TMP/big"
  tar xJf "$BIG_DIR/big_stats_b.tar.xz" -C "$TMP/big"
  A=$(ls -d "$TMP"/big/big_stats_a/step0/*/ | head -1)
  B=$(ls -d "$TMP"/big/big_stats_b/step0/*/ | head -1)
  "$GA" convert -tp "$B" -gp "$A" -o "$TMP/big_out" >/dev/null
  BIG_FILE=$(ls "$TMP"/big_out/*.vis.db | head -1)
  echo "48-layer pair, end to end (target: no slower than 0.10 s):"
  end_to_end "48-layer pair" "$BIG_FILE"
  if [[ $PARTS == *parts* ]]; then
    echo "48-layer pair, load and rules (rules target < 50 ms):"
    "$BENCH" "$BIG_FILE" "$RUNS"
    echo "48-layer pair through the sidecar's diagnosis route:"
    "$ROUTE" "$TMP/big_out" "$RUNS"
  fi
else
  echo "48-layer pair: $BIG_DIR/big_stats_{a,b}.tar.xz not found, skipped"
fi
# SQL on a file (sqlite3, or Python's sqlite3 where the command is missing)
sql() {
  sqlite3 "$1" "$2" 2>/dev/null ||
    python3 -c 'import sqlite3,sys; c=sqlite3.connect(sys.argv[1]); c.executescript(sys.argv[2]); c.commit()' "$1" "$2"
}
if [ -n "${SYNTHETIC:-}" ]; then
  cp -- "$SYNTHETIC" "$TMP/synthetic.vis.db"
  SYNTH_WORDS="the file $SYNTHETIC"
  JUDGE=auto
else
  "$GEN_VISDB" --nodes "$NODES" --out "$TMP/synthetic.vis.db" >/dev/null
  SYNTH_WORDS="a \`gen_visdb --nodes $NODES\` compare"
  JUDGE=auto
  [ "$NODES" -ge 1000000 ] || { JUDGE=null; SYNTH_WORDS+=" (smaller than the goal's 1M: not judged)"; }
fi
echo "synthetic compare, $NODES nodes a side, end to end (targets: ours 2 s / 400 MB, msprobe's shape 5 s / 600 MB):"
end_to_end "ours" "$TMP/synthetic.vis.db"
headline_diagnose ours "$SYNTH_WORDS, our shape (our index and diagnosis table)"
if [[ $PARTS == *parts* ]]; then
  echo "synthetic compare (ours), load and rules (rules target < 1 s after load):"
  /usr/bin/time -f "  (whole run: %e s, peak %M KB)" "$BENCH" "$TMP/synthetic.vis.db" "$RUNS"
  mkdir -p "$TMP/synthetic_dir/run" && ln -- "$TMP/synthetic.vis.db" "$TMP/synthetic_dir/run/"
  echo "synthetic compare (ours) through the sidecar's diagnosis route (target: first answer ≤ 3 s):"
  "$ROUTE" "$TMP/synthetic_dir" "$RUNS"
  rm -rf -- "$TMP/synthetic_dir"
fi
# msprobe's shape: the same file without our objects (dropped in place: no second copy of a
# file of gigabytes)
sql "$TMP/synthetic.vis.db" "DROP TABLE IF EXISTS ga_diagnosis; DROP INDEX IF EXISTS ga_node_list;"
end_to_end "msprobe's shape" "$TMP/synthetic.vis.db"
headline_diagnose msprobe "$SYNTH_WORDS, msprobe's shape (our objects dropped)"
if [[ $PARTS == *parts* ]]; then
  echo "synthetic compare (msprobe's shape), load and rules:"
  /usr/bin/time -f "  (whole run: %e s, peak %M KB)" "$BENCH" "$TMP/synthetic.vis.db" "$RUNS"
fi
rm -f -- "$TMP/synthetic.vis.db"
if [ "${DIAG_CONVERTED:-1}" = 1 ]; then
  cargo build --release -q -p graph-ascend-testkit --bin gen_dump
  target/release/gen_dump "$TMP/dumps/a" "$NODES" >/dev/null
  target/release/gen_dump "$TMP/dumps/b" "$NODES" --perturb >/dev/null
  "$GA" convert -tp "$TMP/dumps/b/step0/rank0" -gp "$TMP/dumps/a/step0/rank0" -o "$TMP/converted" >/dev/null
  rm -rf -- "$TMP/dumps"
  CONVERTED=$(ls "$TMP"/converted/*.vis.db | head -1)
  WORDS="a compare of \`gen_dump\` a, \`gen_dump\` b \`--perturb\` ($NODES entries a side) and \`convert\`"
  JUDGE=auto
  [ "$NODES" -ge 1000000 ] || { JUDGE=null; WORDS+=" (smaller than the goal's 1M: not judged)"; }
  echo "gen_dump + convert compare, $NODES entries a side, end to end (targets: 2 s / 400 MB):"
  end_to_end "converted" "$CONVERTED"
  headline_diagnose converted "$WORDS"
  rm -rf -- "$TMP/converted"
else
  python3 bench/headline.py skip diagnose_1m_converted_time diagnose_1m_converted_memory \
    --why "DIAG_CONVERTED=0: the gen_dump + convert compare skipped"
fi
echo "load average at the end: $(load_average)"
