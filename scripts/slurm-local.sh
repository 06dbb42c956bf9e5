#!/usr/bin/env bash
# A one-node Slurm cluster on this machine, for testing `harness slurm submit` for real.
#
#   bash scripts/slurm-local.sh start DIR   # munged, slurmctld, slurmd; config and state in DIR
#   bash scripts/slurm-local.sh stop DIR    # stops the three daemons it started, cancels jobs
#
# After `start`, `export SLURM_CONF=DIR/slurm.conf` points sbatch, squeue and scontrol at it.
# Installs Debian's slurmctld, slurmd, slurm-client and munge when missing (needs root or
# sudo). Nothing outside DIR is touched but the munge key (/etc/munge/munge.key, made by
# the munge package) and munge's socket folder. Ports 16817/16818 keep clear of a real
# cluster's defaults.
set -euo pipefail

cmd="${1:-}"
dir="${2:-}"
if [ -z "$cmd" ] || [ -z "$dir" ]; then
  echo "usage: $0 start|stop DIR" >&2
  exit 2
fi
SUDO=""
[ "$(id -u)" -eq 0 ] || SUDO="sudo"

stop() {
  export SLURM_CONF="$dir/slurm.conf"
  if [ -f "$SLURM_CONF" ] && command -v scancel >/dev/null; then
    scancel --user="$(id -un)" >/dev/null 2>&1 || true
  fi
  for pidfile in "$dir/slurmd.pid" "$dir/slurmctld.pid" "$dir/munged.pid"; do
    if [ -f "$pidfile" ]; then
      pid="$(cat "$pidfile")"
      $SUDO kill "$pid" 2>/dev/null || true
      for _ in $(seq 50); do
        $SUDO kill -0 "$pid" 2>/dev/null || break
        sleep 0.1
      done
      $SUDO kill -9 "$pid" 2>/dev/null || true
      rm -f "$pidfile"
    fi
  done
}

if [ "$cmd" = stop ]; then
  stop
  echo "one-node Slurm in $dir stopped"
  exit 0
fi
[ "$cmd" = start ] || { echo "usage: $0 start|stop DIR" >&2; exit 2; }

if ! command -v slurmctld >/dev/null || ! command -v slurmd >/dev/null || ! command -v munged >/dev/null || ! command -v sbatch >/dev/null; then
  echo "installing slurmctld, slurmd, slurm-client and munge (one time)..."
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq slurmctld slurmd slurm-client munge >/dev/null
fi

mkdir -p "$dir/state" "$dir/spool" "$dir/munge"
dir="$(cd "$dir" && pwd)"
host="$(hostname -s)"
cpus="$(nproc)"
mem_mb="$(awk '/MemTotal/ {print int($2 / 1024 * 0.9)}' /proc/meminfo)"
user="$(id -un)"

if [ ! -s /etc/munge/munge.key ]; then
  $SUDO mkdir -p /etc/munge
  $SUDO dd if=/dev/urandom of=/etc/munge/munge.key bs=1024 count=1 status=none
fi
$SUDO chown munge:munge /etc/munge/munge.key 2>/dev/null || true
$SUDO chmod 400 /etc/munge/munge.key
$SUDO mkdir -p /run/munge /var/lib/munge /var/log/munge
$SUDO chown munge:munge /run/munge /var/lib/munge /var/log/munge 2>/dev/null || true
$SUDO chmod 755 /run/munge
if ! munge -n >/dev/null 2>&1; then
  $SUDO chown munge:munge "$dir/munge"
  if [ -z "$SUDO" ]; then
    runuser -u munge -- munged --pid-file="$dir/munge/munged.pid"
  else
    sudo -u munge munged --pid-file="$dir/munge/munged.pid"
  fi
  for _ in $(seq 50); do
    munge -n >/dev/null 2>&1 && [ -s "$dir/munge/munged.pid" ] && break
    sleep 0.1
  done
  $SUDO cat "$dir/munge/munged.pid" > "$dir/munged.pid"
fi
munge -n | unmunge >/dev/null

cat > "$dir/slurm.conf" <<EOF
ClusterName=harness-local
SlurmctldHost=$host
SlurmctldPort=16817
SlurmdPort=16818
SlurmUser=$user
SlurmdUser=root
AuthType=auth/munge
CredType=cred/munge
StateSaveLocation=$dir/state
SlurmdSpoolDir=$dir/spool
SlurmctldPidFile=$dir/slurmctld.pid
SlurmdPidFile=$dir/slurmd.pid
SlurmctldLogFile=$dir/slurmctld.log
SlurmdLogFile=$dir/slurmd.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/none
SchedulerType=sched/backfill
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
ReturnToService=2
MpiDefault=none
SlurmdTimeout=30
InactiveLimit=0
KillWait=10
NodeName=$host CPUs=$cpus RealMemory=$mem_mb State=UNKNOWN
PartitionName=local Nodes=$host Default=YES MaxTime=INFINITE State=UP
EOF
# Slurm 22.05's slurmd always starts a cgroup plugin (jobs are tracked by process here, not
# by cgroup): v2 where the host has only the unified hierarchy, else v1.
if [ -f /sys/fs/cgroup/cgroup.controllers ]; then
  printf 'CgroupPlugin=cgroup/v2\nIgnoreSystemd=yes\nCgroupAutomount=no\n' > "$dir/cgroup.conf"
else
  printf 'CgroupPlugin=cgroup/v1\nCgroupAutomount=no\nCgroupMountpoint=/sys/fs/cgroup\n' > "$dir/cgroup.conf"
fi

export SLURM_CONF="$dir/slurm.conf"
$SUDO env SLURM_CONF="$SLURM_CONF" slurmctld -f "$SLURM_CONF" -i
$SUDO env SLURM_CONF="$SLURM_CONF" slurmd -f "$SLURM_CONF"
for _ in $(seq 100); do
  if sinfo -h -o '%T' 2>/dev/null | grep -qE '^(idle|mixed|allocated)'; then
    echo "one-node Slurm up in $dir (node $host, $cpus CPUs): export SLURM_CONF=$SLURM_CONF"
    exit 0
  fi
  sleep 0.2
done
echo "Slurm did not come up; its logs:" >&2
tail -n 20 "$dir/slurmctld.log" "$dir/slurmd.log" >&2 || true
stop
exit 1
