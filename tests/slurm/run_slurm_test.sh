#!/usr/bin/env bash
# A real SLURM test on a single-node cluster on localhost:
#   installs Debian's slurm + munge if missing, writes a minimal slurm.conf (this machine's CPUs and
#   memory), starts munged, slurmctld and slurmd, runs config/test.yaml (its ALBERT, BERT, GPT-2 and
#   GPT-Neo twins) through
#   `snakemake --executor slurm`, checks that every non-local job went through sbatch (the plugin's per-job
#   logs) and that the results equal a local run's, then stops the daemons it started by their PIDs.
# Every wait is bounded. Usage: bash tests/slurm/run_slurm_test.sh   (as root; .ci/run calls it)
# KEEP=1 keeps the work folder (both runs, their logs) after a pass too; a failure always keeps it.
# PERTURB=<results file> checks the rerun path (below).
set -euo pipefail
REPO=$(cd "$(dirname "$0")/../.." && pwd)
PY=${PY:-$REPO/.venv/bin/python}
WORK=$(mktemp -d /tmp/powerlens-slurm.XXXXXX)
PIDS=()
say() { echo "[slurm-test] $*"; }
cleanup() {
  for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null || true; done
  if [ -f "$WORK/slurm.conf.orig" ]; then cp "$WORK/slurm.conf.orig" /etc/slurm/slurm.conf; else rm -f /etc/slurm/slurm.conf; fi
  sleep 1
  for p in "${PIDS[@]}"; do kill -9 "$p" 2>/dev/null || true; done
}
trap cleanup EXIT

if ! command -v slurmctld >/dev/null || ! command -v munged >/dev/null; then
  if [ "$(id -u)" != 0 ]; then
    # in CI (CI=true) a check that cannot run fails: a skip there would pass a submission that was never tested
    if [ -n "${CI:-}" ]; then say "FAILED: slurm is not installed and installing it needs root (CI=$CI)"; exit 1; fi
    say "SKIPPED: slurm is not installed and installing it needs root (outside CI only; in CI this fails)"; exit 0
  fi
  say "installing slurmctld slurmd slurm-client munge (Debian)"
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends slurmctld slurmd slurm-client munge >/dev/null
fi

CPUS=$(nproc)
MEM=$(( $(free -m | awk '/^Mem:/{print $2}') - 2000 ))
mkdir -p "$WORK/spool/ctld" "$WORK/spool/d" /run/munge /var/log/munge /var/lib/munge
chown munge:munge /run/munge /var/log/munge /var/lib/munge 2>/dev/null || true
[ -f /etc/munge/munge.key ] || { dd if=/dev/urandom bs=1 count=1024 of=/etc/munge/munge.key 2>/dev/null; chown munge:munge /etc/munge/munge.key; chmod 400 /etc/munge/munge.key; }
cat > "$WORK/slurm.conf" <<CONF
ClusterName=powerlens
SlurmctldHost=$(hostname)(127.0.0.1)
SlurmUser=root
AuthType=auth/munge
StateSaveLocation=$WORK/spool/ctld
SlurmdSpoolDir=$WORK/spool/d
SlurmctldPidFile=$WORK/slurmctld.pid
SlurmdPidFile=$WORK/slurmd.pid
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core_Memory
SchedulerType=sched/backfill
ReturnToService=2
MinJobAge=300
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/none
MpiDefault=none
SlurmctldLogFile=$WORK/slurmctld.log
SlurmdLogFile=$WORK/slurmd.log
NodeName=localhost NodeAddr=127.0.0.1 CPUs=$CPUS RealMemory=$MEM State=UNKNOWN
PartitionName=debug Nodes=localhost Default=YES MaxTime=INFINITE State=UP
CONF
# srun inside a job looks for the default path, so the config is put there (the original is restored)
mkdir -p /etc/slurm
[ -f /etc/slurm/slurm.conf ] && cp /etc/slurm/slurm.conf "$WORK/slurm.conf.orig"
cp "$WORK/slurm.conf" /etc/slurm/slurm.conf
export SLURM_CONF=/etc/slurm/slurm.conf

say "starting munged, slurmctld, slurmd (work dir $WORK)"
munged -F --force --pid-file="$WORK/munged.pid" >/dev/null 2>&1 & PIDS+=($!)
for i in $(seq 1 20); do munge -n 2>/dev/null | unmunge >/dev/null 2>&1 && break; sleep 0.5; done
slurmctld -D -f "$SLURM_CONF" >/dev/null 2>&1 & PIDS+=($!)
slurmd -D -N localhost -f "$SLURM_CONF" >/dev/null 2>&1 & PIDS+=($!)
for i in $(seq 1 60); do
  if sinfo -h -o %t 2>/dev/null | grep -q idle; then break; fi
  sleep 1
  [ "$i" = 60 ] && { say "node never became idle"; cat "$WORK/slurmctld.log" | tail -20; exit 1; }
done
say "cluster up: $(sinfo -h -o '%P %t %c CPUs %m MB')"

cd "$WORK"
# the executor is what is tested here, not the architectures (pytest runs all six tiny twins): the four
# original families keep this test's time down
"$PY" - "$REPO/config/test.yaml" "$WORK/test-slurm.yaml" <<'PY'
import sys, yaml
cfg = yaml.safe_load(open(sys.argv[1]))
cfg["models"] = {k: v for k, v in cfg["models"].items() if v["arch"] in ("albert", "bert", "gpt2", "gpt_neo")}
yaml.safe_dump(cfg, open(sys.argv[2], "w"), sort_keys=False)
PY
# on_slurm LOG [snakemake args...] / on_local LOG [snakemake args...]: the test config, in its own folder
on_slurm() {
  local log=$1; shift
  timeout 1200 "$PY" -m snakemake -s "$REPO/Snakefile" --configfile "$WORK/test-slurm.yaml" --directory "$WORK/slurm_run" \
    --executor slurm --jobs 4 --slurm-no-account --slurm-status-command squeue \
    --slurm-init-seconds-before-status-checks 2 --slurm-keep-successful-logs --latency-wait 10 \
    --default-resources slurm_partition=debug "$@" > "$log" 2>&1 \
    || { say "snakemake --executor slurm failed"; tail -40 "$log"; exit 1; }
}
on_local() {
  local log=$1; shift
  timeout 1200 "$PY" -m snakemake -s "$REPO/Snakefile" --configfile "$WORK/test-slurm.yaml" --directory "$WORK/local_run" \
    --cores 2 "$@" > "$log" 2>&1 || { say "local run failed"; tail -40 "$log"; exit 1; }
}

say "running the tiny-twin config through snakemake --executor slurm"
on_slurm "$WORK/slurm_snakemake.log"
say "running the same config locally"
on_local "$WORK/local_snakemake.log"

if [ -n "${PERTURB:-}" ]; then
  # the rerun path's own check: PERTURB=results/test/<model>/<file>.npz moves one value of that local array by an
  # ulp, as a one-off of the machine would; the rerun must then find both sides identical (TRANSIENT, PASSED)
  "$PY" - "$WORK/local_run/$PERTURB" <<'PY'
import sys
import numpy as np
d = dict(np.load(sys.argv[1]))
k = next(k for k in sorted(d) if d[k].dtype.kind == "f" and np.isfinite(d[k]).any())
i = int(np.flatnonzero(np.isfinite(d[k]))[0])
d[k].ravel()[i] = np.nextafter(d[k].ravel()[i], np.inf)
np.savez(sys.argv[1], **d)
print(f"[slurm-test] PERTURB: moved {k}, element {i}, of {sys.argv[1]} by one ulp")
PY
fi
rc=0
"$PY" "$REPO/tests/slurm/compare_runs.py" "$WORK/slurm_run" "$WORK/local_run" "$WORK/slurm_snakemake.log" \
  "$WORK/differing.txt" || rc=$?
if [ "$rc" = 3 ]; then
  # Only arrays differ. A difference the executor causes comes back when the same jobs run again on both sides;
  # one that does not is a one-off of the machine (CI at fa465ac: one float64 sum of one job 4.5e-12 apart, never
  # reproduced here: see powerlens.core.runtime.reproducible_mkl). It is reported, never hidden, and the work
  # folder is kept.
  mapfile -t RERUN < "$WORK/differing.txt"
  say "rerunning the job(s) that wrote them, once under SLURM and once locally: ${RERUN[*]}"
  on_slurm "$WORK/slurm_rerun.log" --force -- "${RERUN[@]}"
  on_local "$WORK/local_rerun.log" --force -- "${RERUN[@]}"
  "$PY" "$REPO/tests/slurm/compare_runs.py" "$WORK/slurm_run" "$WORK/local_run" "$WORK/slurm_snakemake.log" \
    || { say "FAILED: the same arrays differ again on rerun: the executor changes the numbers"; exit 1; }
  say "TRANSIENT: the arrays above differed once and are identical on both sides' rerun (not the executor's doing)"
  KEEP=1
elif [ "$rc" != 0 ]; then
  exit "$rc"
fi
say "PASSED"
if [ -n "${KEEP:-}" ]; then say "kept $WORK"; else rm -rf "$WORK"; fi  # a failure keeps it, for its logs
