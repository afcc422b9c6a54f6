#!/usr/bin/env bash
# What GPM costs the agent: two agents side by side, sampling 8 simulated H100s every second with
# --dcgm-names, one with GPU Performance Monitoring on (examples/hopper-gpm.toml) and one on the same
# scenario with `gpm_supported = false`. Running together, both see the same machine load.
#
#   bench/agent_gpm.sh [BUILD_DIR] [SECONDS]     (defaults: build, 60)
#
# Reports, for each agent and its NVML probe (the fake NVML library runs inside the probe), the CPU
# used over the window as a percentage of one core (utime + stime from /proc/PID/stat) and the RSS
# (VmRSS from /proc/PID/status: peak of 1 s readings), as bench/agent.sh does, and the size of one
# /metrics scrape.
set -euo pipefail

build=${1:-build}
seconds=${2:-60}
root=$(cd "$(dirname "$0")/.." && pwd)
binary=$build/bin/gpudoctor
work=$(mktemp -d)
pids=()
trap 'for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done; wait 2>/dev/null || true; rm -rf "$work"' EXIT

sed 's/^gpm_supported = true$/gpm_supported = false/' "$root/examples/hopper-gpm.toml" >"$work/hopper-no-gpm.toml"
grep -q '^gpm_supported = false$' "$work/hopper-no-gpm.toml" || { echo "cannot turn GPM off in the copy" >&2; exit 1; }

start_agent() {  # NAME SCENARIO
  "$binary" --simulate "$2" agent --interval 1s --listen 127.0.0.1:0 --dcgm-names \
    --db "$work/$1.db" --log none 2>"$work/$1.log" &
  pids+=($!)
}
start_agent on "$root/examples/hopper-gpm.toml"
start_agent off "$work/hopper-no-gpm.toml"
sleep 5  # start-up, first samples, probes spawned

ticks=$(getconf CLK_TCK)
cpu_ticks() { awk '{print $14 + $15}' "/proc/$1/stat" 2>/dev/null || echo 0; }
rss_kib() { awk '/^VmRSS:/ {print $2}' "/proc/$1/status" 2>/dev/null || echo 0; }
child_of() { cat /proc/"$1"/task/*/children 2>/dev/null | tr ' ' '\n' | grep -m1 . || true; }
port_of() { sed -nE 's|.*listening on http://127\.0\.0\.1:([0-9]+)/.*|\1|p' "$work/$1.log" | head -1; }

declare -A pid probe cpu0 pcpu0 peak ppeak
names=(on off)
for i in 0 1; do
  n=${names[$i]}
  pid[$n]=${pids[$i]}
  probe[$n]=$(child_of "${pid[$n]}")
  cpu0[$n]=$(cpu_ticks "${pid[$n]}"); pcpu0[$n]=$(cpu_ticks "${probe[$n]:-0}")
  peak[$n]=0; ppeak[$n]=0
done
for ((s = 0; s < seconds; s++)); do
  sleep 1
  for n in "${names[@]}"; do
    a=$(rss_kib "${pid[$n]}"); ((a > peak[$n])) && peak[$n]=$a
    if [[ -n ${probe[$n]} ]]; then p=$(rss_kib "${probe[$n]}"); ((p > ppeak[$n])) && ppeak[$n]=$p; fi
  done
done

percent() { awk -v t="$1" -v hz="$ticks" -v s="$seconds" 'BEGIN {printf "%.2f", 100 * t / hz / s}'; }
mib() { awk -v k="$1" 'BEGIN {printf "%.1f", k / 1024}'; }
echo "window: ${seconds} s at 1 s sampling, 8 simulated H100s (hopper-gpm), --dcgm-names, both agents at once"
for n in "${names[@]}"; do
  used=$(($(cpu_ticks "${pid[$n]}") - cpu0[$n]))
  pused=0
  [[ -n ${probe[$n]} ]] && pused=$(($(cpu_ticks "${probe[$n]}") - pcpu0[$n]))
  port=$(port_of "$n")
  bytes=$(curl -s "http://127.0.0.1:$port/metrics" | wc -c || echo "?")
  gpm_series=$(curl -s "http://127.0.0.1:$port/metrics" | grep -c '^DCGM_FI_PROF_' || true)
  echo "GPM $n: agent CPU $(percent "$used")% of one core, RSS peak $(mib "${peak[$n]}") MiB;" \
    "probe CPU $(percent "$pused")%, RSS peak $(mib "${ppeak[$n]}") MiB;" \
    "together $(percent $((used + pused)))%; /metrics ${bytes} bytes, ${gpm_series} DCGM_FI_PROF_ samples"
done
