#!/usr/bin/env bash
# A single-node Slurm on this host for the launcher=slurm sweep test: installs Debian's
# slurm-wlm and munge when missing, writes /etc/slurm/slurm.conf for this host's name, cores
# and memory (`slurmd -C`), starts munged, slurmctld and slurmd without systemd, and waits
# until the node is idle. Idempotent: running daemons and an unchanged config are kept.
# Needs root (apt-get, daemons). Partition `lwsplit` (default), no GPUs, no accounting.
#
#   bash scripts/start_slurm.sh          # install if needed, configure, start, wait
#   bash scripts/start_slurm.sh --stop   # stop the three daemons this script starts
set -euo pipefail

CONF_DIR=/etc/slurm
CONF=$CONF_DIR/slurm.conf
STATE=/var/lib/slurm-lwsplit
LOGS=/var/log/slurm-lwsplit
PARTITION=lwsplit
WAIT_S=${LWSPLIT_SLURM_WAIT_S:-60}

die() { echo "error: start_slurm: $*" >&2; exit 1; }
# running PIDFILE NAME: the pid file names a live process called NAME (not a reused pid)
running() { [ -f "$1" ] && [ "$(cat "/proc/$(cat "$1")/comm" 2>/dev/null)" = "$2" ]; }

if [ "${1:-}" = --stop ]; then
  for daemon in slurmd:/run/slurmd.pid slurmctld:/run/slurmctld.pid munged:/run/munge/munged.pid; do
    pidfile=${daemon#*:}
    if running "$pidfile" "${daemon%%:*}"; then kill "$(cat "$pidfile")"; fi
  done
  echo "slurm: stopped"
  exit 0
fi
[ -z "${1:-}" ] || die "unknown argument '$1'; allowed: --stop"
[ "$(id -u)" = 0 ] || die "needs root (apt-get install, daemons)"

if ! command -v sbatch >/dev/null || ! command -v slurmctld >/dev/null || ! command -v slurmd >/dev/null \
   || ! command -v munged >/dev/null; then
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -q >/dev/null
  apt-get install -y -q slurm-wlm munge >/dev/null
fi

# -- munge: the key the package made, the daemon as user munge --
[ -s /etc/munge/munge.key ] || { /usr/sbin/mungekey --create --force >/dev/null 2>&1 || \
  dd if=/dev/urandom bs=1 count=1024 of=/etc/munge/munge.key status=none; }
install -d -o munge -g munge -m 0755 /run/munge
install -d -o munge -g munge -m 0700 /var/lib/munge /var/log/munge
chown munge:munge /etc/munge/munge.key && chmod 0400 /etc/munge/munge.key
if ! running /run/munge/munged.pid munged; then
  runuser -u munge -- /usr/sbin/munged
fi
for _ in $(seq 50); do munge -n </dev/null | unmunge >/dev/null 2>&1 && break; sleep 0.1; done
munge -n </dev/null | unmunge >/dev/null 2>&1 || die "munged does not answer (see /var/log/munge/munged.log)"

# -- slurm.conf for this host (name, sockets/cores/threads, memory from `slurmd -C`) --
node_line=$(slurmd -C | head -n 1)          # NodeName=<host> CPUs=.. Boards=.. ... RealMemory=..
node_name=$(sed -n 's/^NodeName=\([^ ]*\).*/\1/p' <<<"$node_line")
[ -n "$node_name" ] || die "cannot read this host from 'slurmd -C': $node_line"
install -d -m 0755 "$CONF_DIR" "$STATE/ctld" "$STATE/d" "$LOGS"
new_conf=$(cat <<EOF
# Written by scripts/start_slurm.sh for $node_name (single-node test cluster).
ClusterName=lwsplit
SlurmctldHost=$node_name
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
StateSaveLocation=$STATE/ctld
SlurmdSpoolDir=$STATE/d
SlurmctldPidFile=/run/slurmctld.pid
SlurmdPidFile=/run/slurmd.pid
SlurmctldLogFile=$LOGS/slurmctld.log
SlurmdLogFile=$LOGS/slurmd.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
SchedulerType=sched/backfill
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
MpiDefault=none
ReturnToService=2
SlurmdTimeout=60
InactiveLimit=0
KillWait=10
$node_line State=UNKNOWN
PartitionName=$PARTITION Nodes=$node_name Default=YES MaxTime=INFINITE State=UP OverSubscribe=NO
EOF
)
changed=0
if [ ! -f "$CONF" ] || [ "$(cat "$CONF")" != "$new_conf" ]; then
  printf '%s\n' "$new_conf" > "$CONF"
  changed=1
fi
# cgroup.conf is read even with proctrack/linuxproc on some builds: make it inert
[ -f "$CONF_DIR/cgroup.conf" ] || printf 'CgroupPlugin=autodetect\nIgnoreSystemd=yes\n' > "$CONF_DIR/cgroup.conf"

if running /run/slurmctld.pid slurmctld; then
  [ "$changed" = 0 ] || scontrol reconfigure
else
  slurmctld
fi
running /run/slurmd.pid slurmd || slurmd

# -- wait until the node takes jobs --
state=""
for _ in $(seq $((WAIT_S * 2))); do
  state=$(sinfo -h -N -n "$node_name" -o %T 2>/dev/null | head -n 1 || true)
  case "$state" in
    idle|mixed|allocated|completing) break ;;
    down*|drain*) scontrol update NodeName="$node_name" State=RESUME >/dev/null 2>&1 || true ;;
  esac
  sleep 0.5
done
case "$state" in
  idle|mixed|allocated|completing) ;;
  *) die "node $node_name is '${state:-unknown}' after ${WAIT_S} s (logs: $LOGS)" ;;
esac
echo "slurm: partition $PARTITION on $node_name ($(sed 's/^NodeName=[^ ]* //; s/ Boards=[^ ]*//' <<<"$node_line")), node $state"
