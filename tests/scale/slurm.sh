#!/usr/bin/env bash
# `make test-scale`, Slurm part: deploy/slurm/convert-array.sh run as it is on a real one-node
# Slurm (Debian's slurm-wlm: slurmctld + slurmd with a generated slurm.conf in a temporary
# folder, no munge: auth/none), on synthetic 16-rank compare dumps in 4 shards. The gather job
# must wait for the array (afterok) and write the file an unsharded conversion writes
# (diff-visdb); then one part is removed and the resume path (-r) re-runs only that shard.
#
#   GRAPH_ASCEND=path/to/graph-ascend GEN_DUMP=path/to/gen_dump bash tests/scale/slurm.sh
set -euo pipefail

ga="${GRAPH_ASCEND:?set GRAPH_ASCEND to the graph-ascend binary}"
gen="${GEN_DUMP:?set GEN_DUMP to the gen_dump binary}"
here="$(cd "$(dirname "$0")" && pwd)"
script="$here/../../deploy/slurm/convert-array.sh"
for cmd in slurmctld slurmd sbatch scontrol sinfo; do
  command -v "$cmd" >/dev/null || { echo "slurm.sh: $cmd not found (apt-get install -y slurm-wlm)" >&2; exit 1; }
done

tmp="$(mktemp -d -t ga-slurm.XXXXXX)"
chmod 755 "$tmp"
cleanup() {
  for d in slurmd slurmctld; do
    [[ -f "$tmp/$d.pid" ]] && kill "$(cat "$tmp/$d.pid")" 2>/dev/null || true
  done
  sleep 1
  rm -rf "$tmp"
}
trap cleanup EXIT

host="$(hostname -s)"
mkdir -p "$tmp/state" "$tmp/spool"
cat > "$tmp/slurm.conf" <<CONF
ClusterName=gatest
SlurmctldHost=$host
SlurmctldPort=${SLURMCTLD_PORT:-16817}
SlurmdPort=${SLURMD_PORT:-16818}
SlurmUser=$(id -un)
SlurmdUser=root
AuthType=auth/none
CredType=cred/none
StateSaveLocation=$tmp/state
SlurmdSpoolDir=$tmp/spool/%n
SlurmctldPidFile=$tmp/slurmctld.pid
SlurmdPidFile=$tmp/slurmd.pid
SlurmctldLogFile=$tmp/slurmctld.log
SlurmdLogFile=$tmp/slurmd.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
SchedulerType=sched/backfill
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/none
MpiDefault=none
ReturnToService=2
MinJobAge=600
NodeName=$host CPUs=$(nproc) RealMemory=1024 State=UNKNOWN
PartitionName=debug Nodes=$host Default=YES MaxTime=INFINITE State=UP
CONF
export SLURM_CONF="$tmp/slurm.conf"

slurmctld -f "$SLURM_CONF" -i
slurmd -f "$SLURM_CONF"
for _ in $(seq 60); do
  state="$(sinfo -h -o %t 2>/dev/null || true)"
  [[ "$state" == idle* ]] && break
  sleep 1
done
[[ "$state" == idle* ]] || { echo "slurm.sh: the node did not come up (state '$state')"; tail -20 "$tmp"/*.log; exit 1; }
echo "slurm.sh: one-node Slurm up ($(slurmctld -V))"

"$gen" "$tmp/dumps/a" 45 --ranks 16 >/dev/null
"$gen" "$tmp/dumps/b" 45 --ranks 16 --perturb >/dev/null
flags=(-tp "$tmp/dumps/b" -gp "$tmp/dumps/a")

# Waits for job $1 to end; fails unless it COMPLETED.
wait_job() {
  local state=""
  for _ in $(seq 300); do
    state="$(scontrol show job "$1" 2>/dev/null | sed -n 's/.*JobState=\([A-Z_]*\).*/\1/p' | head -1)"
    case "$state" in
      COMPLETED) return 0 ;;
      FAILED|CANCELLED|TIMEOUT|NODE_FAIL|OUT_OF_MEMORY|BOOT_FAIL|DEADLINE)
        echo "slurm.sh: job $1 ended $state"; cat "$tmp"/jobdir/logs/* 2>/dev/null; return 1 ;;
    esac
    sleep 1
  done
  echo "slurm.sh: job $1 still '$state' after 300 s"; return 1
}

"$ga" convert "${flags[@]}" -o "$tmp/whole" >/dev/null
whole="$(ls "$tmp"/whole/*.vis.db)"

read -r array gather < <(GRAPH_ASCEND="$ga" "$script" -n 4 -w "$tmp/jobdir" -o "$tmp/out/gathered.vis.db" -- "${flags[@]}")
echo "slurm.sh: array job $array (4 shards), gather job $gather (afterok)"
dep="$(scontrol show job "$gather" | sed -n 's/.*Dependency=\([^ ]*\).*/\1/p')"
[[ "$dep" == afterok:"$array"* || "$dep" == "(null)" ]] || { echo "slurm.sh: gather dependency '$dep'"; exit 1; }  # (null) once met
wait_job "$gather"
# The gather started only after every shard had ended.
field() { scontrol show job "$1" | sed -n "s/.* $2=\([^ ]*\).*/\1/p" | head -1; }
gather_start="$(field "$gather" StartTime)"
for i in 0 1 2 3; do
  wait_job "${array}_$i"
  end="$(field "${array}_$i" EndTime)"
  [[ ! "$gather_start" < "$end" ]] || { echo "slurm.sh: gather started $gather_start before shard $i ended $end"; exit 1; }
done
ls "$tmp/jobdir/parts"
[[ "$(ls "$tmp/jobdir/parts" | wc -l)" == 4 ]] || { echo "slurm.sh: expected 4 parts"; exit 1; }
"$ga" diff-visdb "$whole" "$tmp/out/gathered.vis.db"

# Resume: shard 2's part lost; re-run only it, gather again.
rm "$tmp/jobdir/parts/shard-00002-of-00004.vis.part"
before="$(stat -c %Y.%i "$tmp/jobdir/parts/shard-00001-of-00004.vis.part")"
read -r array gather < <(GRAPH_ASCEND="$ga" "$script" -n 4 -r 2 -w "$tmp/jobdir" -o "$tmp/out/resumed.vis.db" -- "${flags[@]}")
echo "slurm.sh: resume: array job $array (shard 2), gather job $gather"
wait_job "$gather"
[[ "$(stat -c %Y.%i "$tmp/jobdir/parts/shard-00001-of-00004.vis.part")" == "$before" ]] || { echo "slurm.sh: shard 1's part was touched"; exit 1; }
"$ga" diff-visdb "$whole" "$tmp/out/resumed.vis.db"
echo "slurm.sh: passed (array + dependent gather, resume of one shard) on a real Slurm"
