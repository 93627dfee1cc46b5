#!/usr/bin/env bash
# Quick-wait benchmark (not a test): how long a quick request (the configuration of another file)
# waits while heavy ones run, through a live sidecar (plugin/service/examples/quick_wait.rs).
#
# Each run starts `GA serve` on a fresh logdir of three generated files (a root of 100,000
# children, a chain 20,000 levels deep, a small file) and, over the sidecar's socket and the
# shim's own path (CallJson, the answer rendered as the browser's JSON):
#   1. one quick client alone for SECONDS/2;
#   2. the same while HEAVY clients each expand the wide root and reveal the deepest node of the
#      chain in turn, for SECONDS.
# RUNS runs of GA, and, with GA_BEFORE (another build, e.g. main's before the heavy lane), of it
# alternately, so that both see the same load. Printed per binary and phase: the medians over the
# runs of the quick request's median, 99th percentile and worst wait, the worst of all runs, and
# the heavy requests' median time. The load average is printed before and after: on a shared
# machine a wait includes waiting for a core.
#
# Env: GA (default target/release/graph-ascend), GA_BEFORE, RUNS (default 3), SECONDS_PER_RUN
# (default 10), HEAVY (default 3).
set -euo pipefail
[ -n "${GA_BEFORE:-}" ] && GA_BEFORE=$(realpath -m -- "$GA_BEFORE")
[ -n "${GA:-}" ] && GA=$(realpath -m -- "$GA")
cd "$(dirname "$0")/.."
GA=${GA:-target/release/graph-ascend}
RUNS=${RUNS:-3}
SECONDS_PER_RUN=${SECONDS_PER_RUN:-10}
HEAVY=${HEAVY:-3}
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT

cargo build --release -q -p graph-ascend-service --example quick_wait
[ -x "$GA" ] || cargo build --release -q -p graph-ascend
EXAMPLE=target/release/examples/quick_wait

echo "load average before: $(cut -d' ' -f1-3 /proc/loadavg)"
for ((i = 0; i < RUNS; i++)); do
  for name in ${GA_BEFORE:+before} after; do
    bin=$GA
    [ "$name" = before ] && bin=$GA_BEFORE
    "$EXAMPLE" "$bin" "$SECONDS_PER_RUN" "$HEAVY" >"$TMP/$name.$i"
  done
done
echo "load average after: $(cut -d' ' -f1-3 /proc/loadavg)"

python3 - "$TMP" "$RUNS" ${GA_BEFORE:+before} after <<'PY'
import statistics, sys
tmp, runs, names = sys.argv[1], int(sys.argv[2]), sys.argv[3:]
print("| binary | heavy clients | runs | quick requests | quick p50 ms | quick p99 ms | quick worst ms (median) | quick worst ms (of all runs) | heavy answered | heavy p50 ms |")
print("| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
for name in names:
    phases = {}
    for i in range(runs):
        for line in open(f"{tmp}/{name}.{i}"):
            cells = [c.strip() for c in line.strip().strip("|").split("|")]
            if len(cells) == 7 and cells[0].isdigit():
                phases.setdefault(int(cells[0]), []).append([float(c) for c in cells[1:]])
    for heavy, rows in sorted(phases.items()):
        med = lambda k: statistics.median(r[k] for r in rows)
        print(f"| {name} | {heavy} | {len(rows)} | {med(0):.0f} | {med(1):.1f} | {med(2):.1f} | {med(3):.1f} | "
              f"{max(r[3] for r in rows):.1f} | {med(4):.0f} | {med(5):.0f} |")
PY
