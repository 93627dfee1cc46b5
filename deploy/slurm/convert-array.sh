#!/usr/bin/env bash
# A sharded graph-ascend conversion on Slurm: a job array of N shards, then a gather job that
# runs only once every shard has succeeded (--dependency=afterok). See docs/scale.md.
#
#   deploy/slurm/convert-array.sh -n SHARDS -w WORKDIR -o OUT [-s "SBATCH OPTIONS"] [-r LIST] \
#       -- -tp TARGET [-gp GOLDEN] [other graph-ascend convert flags]
#
#   -n SHARDS   how many shards (array tasks 0..SHARDS-1)
#   -w WORKDIR  shared folder for the parts (WORKDIR/parts) and the logs (WORKDIR/logs)
#   -o OUT      where the gathered .vis.db goes: a folder, or a file name ending in .vis.db
#   -s OPTS     more sbatch options for both jobs (partition, account, time, memory, …)
#   -r LIST     resume: re-run only these shards (an sbatch --array list, e.g. 3,7 or 4-6),
#               then gather again; the other shards' parts are kept as they are
#   GRAPH_ASCEND  the graph-ascend command (default: graph-ascend on PATH)
#
# Prints the two job ids (array, gather). Every path must be on storage that all nodes see.
set -euo pipefail

usage() { sed -n '2,17p' "$0" | sed 's/^# \{0,1\}//' >&2; exit 2; }

shards="" workdir="" out="" sbatch_opts="" resume=""
while getopts "n:w:o:s:r:h" opt; do
  case "$opt" in
    n) shards="$OPTARG" ;;
    w) workdir="$OPTARG" ;;
    o) out="$OPTARG" ;;
    s) sbatch_opts="$OPTARG" ;;
    r) resume="$OPTARG" ;;
    *) usage ;;
  esac
done
shift $((OPTIND - 1))
[[ "${1:-}" == "--" ]] && shift
[[ -n "$shards" && -n "$workdir" && -n "$out" && $# -gt 0 ]] || usage
[[ "$shards" =~ ^[1-9][0-9]*$ ]] || { echo "convert-array.sh: -n must be a positive number" >&2; exit 2; }
for a in "$@"; do
  case "$a" in
    -o|--output_path|-o=*|--output_path=*|--shard|--shard=*|--shard-count|--shard-count=*)
      echo "convert-array.sh: give the conversion's flags without $a (the script sets it)" >&2; exit 2 ;;
  esac
done

ga="${GRAPH_ASCEND:-graph-ascend}"
parts="$workdir/parts"
logs="$workdir/logs"
mkdir -p "$parts" "$logs"
convert_flags=$(printf '%q ' "$@")
# shellcheck disable=SC2086  # $sbatch_opts is a list of options on purpose
if [[ -z "$resume" ]]; then
  # The whole array: each task's shard comes from SLURM_ARRAY_TASK_ID/_MIN/_STEP/_COUNT.
  array=$(sbatch --parsable --job-name=ga-convert --array="0-$((shards - 1))" \
    --output="$logs/convert-%A_%a.log" $sbatch_opts \
    --wrap="exec $(printf '%q' "$ga") convert $convert_flags -o $(printf '%q' "$parts") --shard")
else
  # Some shards again: an array of only those ids, so each task names its shard of N itself.
  array=$(sbatch --parsable --job-name=ga-convert --array="$resume" \
    --output="$logs/convert-%A_%a.log" $sbatch_opts \
    --wrap="exec $(printf '%q' "$ga") convert $convert_flags -o $(printf '%q' "$parts") --shard \"\$SLURM_ARRAY_TASK_ID/$shards\"")
fi
array="${array%%;*}"
# shellcheck disable=SC2086
gather=$(sbatch --parsable --job-name=ga-gather --dependency="afterok:$array" --kill-on-invalid-dep=yes \
  --output="$logs/gather-%j.log" $sbatch_opts \
  --wrap="exec $(printf '%q' "$ga") gather $(printf '%q' "$parts") -o $(printf '%q' "$out")")
gather="${gather%%;*}"
echo "$array $gather"
