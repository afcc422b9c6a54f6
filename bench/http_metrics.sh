#!/usr/bin/env bash
# /metrics under load: requests per second and latency percentiles from wrk,
# against the agent's HTTP server serving 8 synthetic GPUs, with the
# dcgm-exporter names on (the larger body; DCGM=0 for gpudoctor's names only).
# Also reports the body size and the server's CPU time per request.
#
# Usage: bench/http_metrics.sh [BUILD_DIR] [DURATION] [CONNECTIONS]
#   defaults: build 20s 4      (needs wrk and curl: apt-get install wrk curl)
# Or point it at a running agent: URL=http://127.0.0.1:9847/metrics bench/http_metrics.sh
set -euo pipefail
build=${1:-build}
duration=${2:-20s}
connections=${3:-4}
threads=$(( connections < 2 ? 1 : 2 ))
command -v wrk >/dev/null || { echo "wrk is not installed (apt-get install wrk)" >&2; exit 2; }

server_pid=
cleanup() { [[ -n $server_pid ]] && kill "$server_pid" 2>/dev/null && wait "$server_pid" 2>/dev/null; true; }
trap cleanup EXIT

url=${URL:-}
if [[ -z $url ]]; then
  log=$(mktemp)
  dcgm_flag=()
  [[ ${DCGM:-1} == 1 ]] && dcgm_flag=(--dcgm)
  "$build/bin/agent_http_demo" --gpus 8 "${dcgm_flag[@]}" --threads 4 --listen 127.0.0.1:0 >"$log" 2>&1 &
  server_pid=$!
  for _ in $(seq 100); do grep -q '^listening on ' "$log" && break; sleep 0.1; done
  base=$(sed -n 's/^listening on //p' "$log")
  [[ -n $base ]] || { cat "$log" >&2; exit 1; }
  url=${base}metrics
fi

bytes=$(curl -s "$url" | wc -c)
cpu_ticks() { awk '{ print $14 + $15 }' "/proc/$server_pid/stat"; }
[[ -n $server_pid ]] && before=$(cpu_ticks)
out=$(wrk -t"$threads" -c"$connections" -d"$duration" --latency "$url")
[[ -n $server_pid ]] && after=$(cpu_ticks)

requests=$(awk '/requests in/ { print $1 }' <<<"$out")
echo "$out"
echo
echo "url: $url"
echo "body: $bytes bytes; connections: $connections; duration: $duration"
awk '/Requests\/sec/ { printf "requests/s: %s\n", $2 }' <<<"$out"
awk '$1 == "50%" || $1 == "99%" { printf "p%s latency: %s\n", substr($1, 1, length($1) - 1), $2 }' <<<"$out"
if [[ -n $server_pid ]]; then
  hz=$(getconf CLK_TCK)
  awk -v t=$((after - before)) -v hz="$hz" -v n="$requests" \
    'BEGIN { printf "server CPU: %.1f us per request\n", t / hz * 1e6 / n }'
fi
