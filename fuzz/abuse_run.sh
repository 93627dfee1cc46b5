#!/usr/bin/env bash
# The abuse run, repeated on new seeds (not a test): plugin/service/examples/abuse_run.rs against a
# live sidecar, once per seed. Prints each run's figures: files and requests tried, answers,
# whether the sidecar lived, its peak memory, the worst wait of a quick request while a heavy one
# ran, and whether a file that must not change did. Fails when any run does.
#
# Env: GA (default target/release/graph-ascend), SEEDS (default "101 202 303"), FILES (per seed,
# default 300), REQUESTS (per seed, default 4000).
set -euo pipefail
[ -n "${GA:-}" ] && GA=$(realpath -m -- "$GA")
cd "$(dirname "$0")/.."
GA=${GA:-target/release/graph-ascend}
SEEDS=${SEEDS:-101 202 303}
FILES=${FILES:-300}
REQUESTS=${REQUESTS:-4000}
cargo build --release -q -p graph-ascend-service --example abuse_run
[ -x "$GA" ] || cargo build --release -q -p graph-ascend
status=0
for seed in $SEEDS; do
  target/release/examples/abuse_run "$GA" "$seed" "$FILES" "$REQUESTS" || status=1
  echo
done
exit $status
