#!/usr/bin/env bash
# `gpudoctor slurm` against real Slurm daemons: munged, slurmctld and one
# slurmd (node1) on 127.0.0.1, all in a temporary folder, plus node2-node4
# that never register (they stay down). Checks the dry run, the drain and its
# reason, the resume, that an admin's drain is never resumed, and the circuit
# breaker. Every daemon is killed at the end, pass or fail.
#
#   tests/slurm/slurm_daemons_test.sh build/bin/gpudoctor [examples folder]
#
# Exit 77 (skipped) when not root, when the Slurm and MUNGE daemons are not
# installed (Debian: slurmctld slurmd slurm-client munge), or when no cgroup
# file system is mounted (slurmd will not start without one).
set -uo pipefail

GPUDOCTOR=${1:?usage: slurm_daemons_test.sh GPUDOCTOR [EXAMPLES]}
EXAMPLES=${2:-$(cd "$(dirname "$0")/../../examples" && pwd)}
CRITICAL="$EXAMPLES/gpu-fallen-off-bus.toml"
HEALTHY="$EXAMPLES/healthy-8xh100.toml"

skip() {
  echo "SKIP: $*"
  exit 77
}
[[ $(id -u) -eq 0 ]] || skip "needs root (slurmd and munged run as root here)"
for program in munged slurmctld slurmd sinfo scontrol; do
  command -v "$program" >/dev/null || skip "$program is not installed (apt-get install slurmctld slurmd slurm-client munge)"
done
# slurmd initialises its cgroup plugin whatever the slurm.conf, and stops without a cgroup file
# system, which every systemd machine mounts but a bare chroot or container may lack.
awk '$2 == "/sys/fs/cgroup" { found = 1 } END { exit !found }' /proc/mounts ||
  skip "slurmd needs a cgroup file system at /sys/fs/cgroup, and none is mounted here"
[[ -x $GPUDOCTOR ]] || { echo "FAIL: $GPUDOCTOR is not an executable"; exit 1; }

WORK=$(mktemp -d /tmp/gpudoctor-slurm.XXXXXX)
chmod 0755 "$WORK"  # munged wants every folder above its socket searchable by all
PIDS=()
cleanup() {
  for pid in "${PIDS[@]}"; do kill "$pid" 2>/dev/null; done
  for pid in "${PIDS[@]}"; do
    for _ in $(seq 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
    kill -KILL "$pid" 2>/dev/null
  done
  rm -rf "$WORK"
}
trap cleanup EXIT
trap 'exit 1' INT TERM

fail() {
  echo "FAIL: $*"
  for log in munged.out slurmctld.log slurmd.log; do
    echo "---- $log (last 30 lines)"
    tail -n 30 "$WORK/$log" 2>/dev/null
  done
  echo "---- sinfo"
  sinfo --noheader --Node --format='%N|%R|%T|%E' 2>&1
  exit 1
}

# Three free TCP ports: slurmctld, node1's slurmd, and one nobody listens on for node2-node4.
free_ports() {
  if command -v python3 >/dev/null; then
    python3 -c 'import socket
s = [socket.socket() for _ in range(3)]
for x in s: x.bind(("127.0.0.1", 0))
print(*(x.getsockname()[1] for x in s))'
  else
    local base=$((20000 + RANDOM % 20000))
    echo "$base $((base + 1)) $((base + 2))"
  fi
}
read -r CTLD_PORT SLURMD_PORT UNUSED_PORT < <(free_ports)

# MUNGE with its own key, socket and files.
dd if=/dev/urandom of="$WORK/munge.key" bs=1024 count=1 status=none
chmod 0400 "$WORK/munge.key"
munged --foreground --socket="$WORK/munge.sock" --key-file="$WORK/munge.key" --pid-file="$WORK/munged.pid" \
  --log-file="$WORK/munged.log" --seed-file="$WORK/munged.seed" >"$WORK/munged.out" 2>&1 &
PIDS+=($!)
for _ in $(seq 50); do [[ -S $WORK/munge.sock ]] && break; sleep 0.1; done
[[ -S $WORK/munge.sock ]] || fail "munged did not create its socket"

mkdir -p "$WORK/state" "$WORK/spool"
cat >"$WORK/slurm.conf" <<EOF
ClusterName=gpudoctor-test
SlurmctldHost=localhost(127.0.0.1)
AuthType=auth/munge
AuthInfo=socket=$WORK/munge.sock
SlurmUser=root
SlurmdUser=root
SlurmctldPort=$CTLD_PORT
SlurmdPort=$SLURMD_PORT
StateSaveLocation=$WORK/state
SlurmdSpoolDir=$WORK/spool
SlurmctldPidFile=$WORK/slurmctld.pid
SlurmdPidFile=$WORK/slurmd.pid
SlurmctldLogFile=$WORK/slurmctld.log
SlurmdLogFile=$WORK/slurmd.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
MpiDefault=none
ReturnToService=2
NodeName=node1 NodeAddr=127.0.0.1 CPUs=1 State=UNKNOWN
NodeName=node[2-4] NodeAddr=127.0.0.1 Port=$UNUSED_PORT CPUs=1 State=UNKNOWN
PartitionName=debug Nodes=ALL Default=YES MaxTime=INFINITE State=UP
EOF
export SLURM_CONF=$WORK/slurm.conf
slurmctld -D -f "$SLURM_CONF" >"$WORK/slurmctld.out" 2>&1 &
PIDS+=($!)
slurmd -D -N node1 -f "$SLURM_CONF" >"$WORK/slurmd.out" 2>&1 &
PIDS+=($!)

# node1's state and reason as sinfo prints them: "idle|none".
node_state() { sinfo --noheader --Node --nodes="$1" --format='%T|%E' 2>/dev/null | head -n 1; }
wait_for_state() {  # NODE PATTERN SECONDS
  for _ in $(seq $((${3} * 2))); do
    [[ $(node_state "$1") =~ $2 ]] && return 0
    sleep 0.5
  done
  fail "$1 did not reach state $2 within $3 s (it is $(node_state "$1"))"
}
wait_for_state node1 '^idle[|]' 60
echo "ok: slurmctld and slurmd up, node1 idle"

OUTPUT=""
STATUS=0
# gpudoctor slurm SCENARIO ARGS...: output in $OUTPUT, exit status in $STATUS.
run_slurm() {
  local scenario=$1
  shift
  OUTPUT=$(timeout 60 "$GPUDOCTOR" --color never slurm --simulate "$scenario" --no-host --no-logs --node node1 "$@" 2>&1)
  STATUS=$?
}
expect_status() {
  [[ $STATUS -eq $1 ]] || fail "$2: exit status $STATUS, expected $1; output:
$OUTPUT"
}
expect_output() {
  [[ $OUTPUT == *"$1"* ]] || fail "$2: output lacks \"$1\":
$OUTPUT"
}

# 1. A dry run on a critical scenario says what it would do and drains nothing.
run_slurm "$CRITICAL" --max-drain-share 0.5
expect_status 2 "dry run, critical"
expect_output "would drain node1: gpudoctor:" "dry run, critical"
[[ $(node_state node1) =~ ^idle ]] || fail "the dry run changed node1: $(node_state node1)"
echo "ok: dry run drains nothing, exit 2"

# 2. --drain drains it, with a reason gpudoctor can recognise.
run_slurm "$CRITICAL" --drain --max-drain-share 0.5
expect_status 2 "--drain, critical"
expect_output "drained node1: gpudoctor:" "--drain, critical"
[[ $(node_state node1) =~ ^drain.*\|gpudoctor:\  ]] || fail "node1 is not drained by gpudoctor: $(node_state node1)"
scontrol show node node1 | grep -q "Reason=gpudoctor: " || fail "scontrol shows no gpudoctor reason: $(scontrol show node node1)"
echo "ok: --drain drained node1 ($(node_state node1))"

# 3. Healthy again: resumed. Slurm marks a node it has just resumed "idle*" (not
# responding) until its next ping, which can take a while; the drain is gone at once.
run_slurm "$HEALTHY" --drain
expect_status 0 "--drain, healthy"
expect_output "resumed node1" "--drain, healthy"
wait_for_state node1 '^idle[*]?[|]none$' 10
echo "ok: healthy node1 resumed ($(node_state node1))"

# 4. A node an admin drained is never resumed, and its reason never replaced.
scontrol update nodename=node1 state=drain reason="admin: maintenance" || fail "scontrol could not drain node1"
run_slurm "$HEALTHY" --drain
expect_status 0 "--drain, healthy, drained by an admin"
[[ $(node_state node1) =~ ^drained[*]?[|]admin:\ maintenance$ ]] || fail "the admin's drain was undone: $(node_state node1)"
run_slurm "$CRITICAL" --drain --max-drain-share 1
expect_status 2 "--drain, critical, drained by an admin"
[[ $(node_state node1) =~ ^drained[*]?[|]admin:\ maintenance$ ]] || fail "the admin's reason was replaced: $(node_state node1)"
scontrol update nodename=node1 state=resume || fail "scontrol could not resume node1"
echo "ok: the admin's drain was left alone"

# 5. Circuit breaker: node2 and node3 already drained by gpudoctor; node1 would make 3 of 4 (75%).
for node in node2 node3; do
  scontrol update nodename=$node state=drain reason="gpudoctor: test" || fail "scontrol could not drain $node"
done
run_slurm "$CRITICAL" --drain --max-drain-share 0.5
expect_status 2 "breaker at 0.5"
expect_output "circuit breaker: 2 of 4 nodes in partition debug are already drained by gpudoctor" "breaker at 0.5"
[[ $(node_state node1) =~ ^idle ]] || fail "the breaker did not hold: $(node_state node1)"
run_slurm "$CRITICAL" --drain --prolog --max-drain-share 0.5
expect_status 0 "prolog while the breaker holds"
expect_output "circuit breaker" "prolog while the breaker holds"
echo "ok: the breaker holds at 0.5"

run_slurm "$CRITICAL" --drain --max-drain-share 0.8 --json
expect_status 2 "breaker at 0.8"
expect_output '"action": "drain"' "breaker at 0.8"
[[ $(node_state node1) =~ ^drain.*\|gpudoctor:\  ]] || fail "node1 was not drained at 0.8: $(node_state node1)"
echo "ok: drained at 0.8 ($(node_state node1))"

# 6. In the prolog, a critical finding fails the prolog (exit 1).
scontrol update nodename=node1 state=resume || fail "scontrol could not resume node1"
run_slurm "$CRITICAL" --prolog --max-drain-share 1
expect_status 1 "prolog, critical"
echo "ok: prolog exits 1 on a critical finding"

echo "PASS"
