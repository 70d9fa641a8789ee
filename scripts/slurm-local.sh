#!/usr/bin/env bash
# A one-node SLURM cluster on this machine, for lmpt's tests and for trying hydra/launcher=slurm by hand.
#
#   scripts/slurm-local.sh start DIR   # install slurm-wlm and munge if missing (root, apt-get), write the config
#                                      # into DIR, start munged, slurmctld and slurmd, wait until the node is idle,
#                                      # then print `export SLURM_CONF=DIR/slurm.conf` (eval it to use the cluster)
#   scripts/slurm-local.sh stop DIR    # cancel its jobs, stop the daemons started with DIR's config and any job
#                                      # step daemon they left; nothing else
#
# The node is this machine under its short host name, with every CPU it may use and most of its memory, in one
# partition named `local`. The daemons run as root with everything (state, spool, logs, munge key and socket)
# inside DIR, on the first free ports from 6817 on, so a system SLURM, if any, is left alone. Unlike a production
# cluster, a requeued job waits 11 s instead of 121 s before it may start again (cred_expire=10) and the scheduler
# looks at pending jobs every 2 s instead of 60 s; sbatch refuses jobs the partition can never run
# (EnforcePartLimits=ALL). There is no accounting database, so `sacct` answers "accounting storage is disabled".
set -euo pipefail

usage() {
    echo "usage: $0 start|stop DIR" >&2
    exit 2
}
[[ $# -eq 2 ]] || usage
action=$1
dir=$(realpath -m "$2")

log() { echo "slurm-local: $*" >&2; }
die() {
    log "error: $*"
    exit 1
}

install_packages() {
    if command -v slurmctld >/dev/null && command -v slurmd >/dev/null && command -v sbatch >/dev/null &&
        command -v munged >/dev/null; then
        return
    fi
    log "installing slurm-wlm and munge"
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq >&2
    apt-get install -y -qq --no-install-recommends slurm-wlm munge >&2
}

port_in_use() { (echo >"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }

free_port() {
    local port=$1
    while port_in_use "$port"; do
        port=$((port + 1))
    done
    echo "$port"
}

write_config() {
    local host cpus mem_mb ctld_port slurmd_port
    host=$(hostname -s)
    cpus=$(env -u OMP_NUM_THREADS -u OMP_THREAD_LIMIT nproc)  # nproc alone obeys OMP_NUM_THREADS
    mem_mb=$(($(awk '/^MemTotal:/ {print $2}' /proc/meminfo) * 9 / 10 / 1024))
    ctld_port=$(free_port 6817)
    slurmd_port=$(free_port $((ctld_port + 1)))
    mkdir -p "$dir"/{munge,state,spool,log}
    chmod 700 "$dir/munge"
    head -c 1024 /dev/urandom >"$dir/munge/munge.key"
    chmod 400 "$dir/munge/munge.key"
    cat >"$dir/slurm.conf" <<EOF
# Written by scripts/slurm-local.sh: one node, this machine.
ClusterName=lmpt-local
SlurmctldHost=$host(127.0.0.1)
SlurmUser=root
SlurmdUser=root
SlurmctldPort=$ctld_port
SlurmdPort=$slurmd_port
AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket=$dir/munge/munge.socket,cred_expire=10
StateSaveLocation=$dir/state
SlurmdSpoolDir=$dir/spool
SlurmctldPidFile=$dir/slurmctld.pid
SlurmdPidFile=$dir/slurmd.pid
SlurmctldLogFile=$dir/log/slurmctld.log
SlurmdLogFile=$dir/log/slurmd.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU
SchedulerType=sched/backfill
SchedulerParameters=sched_interval=2,bf_interval=2
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/none
MpiDefault=none
SwitchType=switch/none
ReturnToService=2
EnforcePartLimits=ALL
KillWait=30
MinJobAge=600
SlurmdTimeout=300
NodeName=$host NodeAddr=127.0.0.1 CPUs=$cpus RealMemory=$mem_mb State=UNKNOWN
PartitionName=local Nodes=ALL Default=YES MaxTime=INFINITE State=UP
EOF
}

# The pid in a daemon's pid file, if that process is alive.
live_pid() {
    local file=$1 pid
    [[ -s $file ]] || return 1
    pid=$(<"$file")
    [[ $pid =~ ^[0-9]+$ ]] && kill -0 "$pid" 2>/dev/null && echo "$pid"
}

wait_for() {
    local what=$1 seconds=$2
    shift 2
    for _ in $(seq $((seconds * 10))); do
        "$@" >/dev/null 2>&1 && return 0
        sleep 0.1
    done
    die "$what not ready after ${seconds}s (logs in $dir/log)"
}

node_idle() { [[ $(sinfo --noheader --node "$(hostname -s)" --format=%t) == idle ]]; }

start() {
    [[ $(id -u) -eq 0 ]] || die "run it as root: the daemons run as root, as SLURM's slurmd must"
    install_packages
    [[ ! -e $dir/slurm.conf ]] || die "$dir already holds a cluster: stop it first ($0 stop $dir)"
    write_config
    trap 'log "start failed: stopping what it started"; stop' EXIT
    export SLURM_CONF=$dir/slurm.conf
    munged --force --key-file="$dir/munge/munge.key" --socket="$dir/munge/munge.socket" \
        --pid-file="$dir/munge/munged.pid" --log-file="$dir/log/munged.log" --seed-file="$dir/munge/munged.seed"
    wait_for munged 10 live_pid "$dir/munge/munged.pid"
    slurmctld -f "$SLURM_CONF"
    wait_for slurmctld 30 scontrol ping
    slurmd -f "$SLURM_CONF"
    wait_for "the node" 60 node_idle
    trap - EXIT
    log "cluster up: partition local, $(sinfo --noheader --format='%c CPUs, %m MB' | head -1), in $dir"
    echo "export SLURM_CONF=$SLURM_CONF"
}

# Cancel the cluster's jobs and wait until they are gone, so no job step is left behind its slurmd (if its
# controller is among the processes in $1).
cancel_jobs() {
    [[ $1 == *":slurmctld"* && -f $dir/slurm.conf ]] || return 0
    export SLURM_CONF=$dir/slurm.conf
    local jobs
    jobs=$(squeue --noheader --format=%i 2>/dev/null) || return 0
    [[ -n $jobs ]] || return 0
    # shellcheck disable=SC2086  # one argument per job id
    scancel $jobs || true
    for _ in $(seq 900); do
        [[ -z $(squeue --noheader --format=%i 2>/dev/null) ]] && return 0
        sleep 0.1
    done
    log "jobs still there after 90s: $(squeue --noheader --format=%i | tr '\n' ' ')"
}

# Wait for a process to end, killing it after 10 s.
reap() {
    local pid=$1
    for _ in $(seq 100); do
        kill -0 "$pid" 2>/dev/null || return 0
        sleep 0.1
    done
    kill -KILL "$pid" 2>/dev/null || true
}

# This cluster's processes, "pid:name" per line: daemons started with its config or munge socket on their command
# line (found even when DIR's pid files are gone) and step daemons carrying its SLURM_CONF, nothing else.
cluster_processes() {
    local proc comm
    for proc in /proc/[0-9]*; do
        comm=$(cat "$proc/comm" 2>/dev/null) || continue
        case $comm in
        slurmd | slurmctld | munged)
            { tr '\0' '\n' <"$proc/cmdline"; } 2>/dev/null |
                grep -qxE -e "$(printf '%q' "$dir/slurm.conf")" -e "--socket=$(printf '%q' "$dir/munge/munge.socket")" ||
                continue
            ;;
        slurmstepd)
            { tr '\0' '\n' <"$proc/environ"; } 2>/dev/null | grep -qxF "SLURM_CONF=$dir/slurm.conf" || continue
            ;;
        *) continue ;;
        esac
        echo "${proc#/proc/}:$comm"
    done
}

stop() {
    local name pid entry processes stopped=()
    processes=$(cluster_processes)
    cancel_jobs "$processes"
    for name in slurmd slurmctld munged slurmstepd; do # the node first, the controller, then authentication
        for entry in $(grep ":$name\$" <<<"$processes"); do
            pid=${entry%%:*}
            kill -TERM "$pid" 2>/dev/null || continue
            reap "$pid"
            stopped+=("$entry")
        done
    done
    log "stopped ${stopped[*]:-nothing (no daemon of $dir was running)}"
}

case $action in
start) start ;;
stop) stop ;;
*) usage ;;
esac
