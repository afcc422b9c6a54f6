#!/usr/bin/env bash
# CPU and memory of `gpudoctor agent` sampling 8 simulated GPUs every second.
#
#   bench/agent.sh [BUILD_DIR] [SECONDS] [LOG]     (defaults: build, 60, none)
#   LOG: a file for the agent to follow (--log), or none.
#   BUILD_DIR must be configured with -DGPUDOCTOR_BENCH=ON (docs/benchmarks.md).
#
# Reports, for the agent process and for its NVML probe process (the fake
# NVML library runs inside the probe), the CPU used over the window as a
# percentage of one core (utime + stime from /proc/PID/stat) and the RSS
# (VmRSS from /proc/PID/status: peak of 1 s readings, and at the end).
# The baseline, measured in the same run: the floor program (bench/nvml_floor.c)
# taking as many snapshots in-process, with no isolation, history or server.
set -euo pipefail

build=${1:-build}
seconds=${2:-60}
log=${3:-none}
root=$(cd "$(dirname "$0")/.." && pwd)
binary=$build/bin/gpudoctor
work=$(mktemp -d)
trap 'kill "$agent" 2>/dev/null || true; wait 2>/dev/null || true; rm -rf "$work"' EXIT

"$binary" --simulate "$root/examples/healthy-8xh100.toml" agent --interval 1s --listen 127.0.0.1:0 \
  --db "$work/history.db" --log "$log" 2>"$work/agent.log" &
agent=$!
sleep 5  # start-up, first samples, probe spawned

probe=$(cat /proc/$agent/task/*/children 2>/dev/null | tr ' ' '\n' | grep -m1 . || true)
ticks=$(getconf CLK_TCK)
cpu_ticks() { awk '{print $14 + $15}' "/proc/$1/stat" 2>/dev/null || echo 0; }
rss_kib() { awk '/^VmRSS:/ {print $2}' "/proc/$1/status" 2>/dev/null || echo 0; }

agent_start=$(cpu_ticks "$agent"); probe_start=$(cpu_ticks "${probe:-0}")
agent_peak=0; probe_peak=0
for ((i = 0; i < seconds; i++)); do
  sleep 1
  a=$(rss_kib "$agent"); ((a > agent_peak)) && agent_peak=$a
  if [[ -n $probe ]]; then p=$(rss_kib "$probe"); ((p > probe_peak)) && probe_peak=$p; fi
done
agent_used=$(($(cpu_ticks "$agent") - agent_start))
probe_used=0
[[ -n $probe ]] && probe_used=$(($(cpu_ticks "$probe") - probe_start))

percent() { awk -v t="$1" -v hz="$ticks" -v s="$seconds" 'BEGIN {printf "%.2f", 100 * t / hz / s}'; }
mib() { awk -v k="$1" 'BEGIN {printf "%.1f", k / 1024}'; }
echo "window: ${seconds} s at 1 s sampling, 8 simulated GPUs (healthy-8xh100)"
echo "agent (pid $agent): CPU $(percent "$agent_used")% of one core, RSS peak $(mib "$agent_peak") MiB, end $(mib "$(rss_kib "$agent")") MiB"
echo "probe (pid ${probe:-none}): CPU $(percent "$probe_used")% of one core, RSS peak $(mib "$probe_peak") MiB"
if command -v sqlite3 >/dev/null; then
  echo "GPU samples stored: $(sqlite3 "$work/history.db" 'SELECT COUNT(*) FROM samples_raw')"
fi

floor=$(GPUDOCTOR_SCENARIO="$root/examples/healthy-8xh100.toml" GPUDOCTOR_FAKE_NOW=60s \
  "$build/bin/nvml_floor" "$build/bin/libgpudoctor_fake_nvml.so" "$seconds" 2>&1 || true)
[[ $floor == *floor_cpu_us_per_snapshot=* ]] || echo "baseline: nvml_floor failed: $floor"
floor_us=$(sed -nE 's/.*floor_cpu_us_per_snapshot=([0-9.]+).*/\1/p' <<<"$floor")
if [[ -n $floor_us ]]; then
  awk -v a="$agent_used" -v p="$probe_used" -v hz="$ticks" -v s="$seconds" -v f="$floor_us" 'BEGIN {
    total_us = (a + p) * 1e6 / hz
    printf "baseline: nvml_floor %.1f us per snapshot; agent + probe %.0f us per sample = %.0fx the floor\n",
           f, total_us / s, total_us / s / f }'
fi
