#!/usr/bin/env bash
# /metrics under load while slow clients hold connections open, against the
# agent's HTTP server (agent_http_demo over synthetic GPUs, dcgm-exporter names
# on) and, in the same run, against the floor (bench/http_floor.c: one epoll
# thread writing the same bytes, prepared once).
#
# For each GPU count and encoding: 4 slow-loris clients (bench/http_clients.py)
# trickle header bytes on connections they keep open, while
# `wrk -t2 -c50 --latency` scrapes /metrics. Then 1,000 clients connect at
# once and each asks for /healthz. Prints one table row per case: failed
# requests (wrk's socket errors and timeouts, and non-2xx answers),
# requests/s, p50 and p99, what one more scrape on its own connection got
# halfway through (curl, 10 s limit), and how often the server closed a slow
# client (which then reconnected).
#
# Usage: bench/http_metrics.sh [BUILD_DIR] [DURATION]      defaults: build 20s
#   GPUS="8 64" ENCODINGS="identity gzip" BURST=1000 select the cases;
#   DEMO=path/to/agent_http_demo measures another build of the server.
# Needs wrk, curl and python3 (apt-get install wrk curl python3).
set -euo pipefail
build=${1:-build}
duration=${2:-20s}
root=$(cd "$(dirname "$0")/.." && pwd)
demo=${DEMO:-$build/bin/agent_http_demo}
floor=$build/bin/http_floor
clients=$root/bench/http_clients.py
for tool in wrk curl python3; do
  command -v $tool >/dev/null || { echo "$tool is not installed" >&2; exit 2; }
done

work=$(mktemp -d)
cleanup() {
  for pid_file in "$work"/*.pid; do [[ -e $pid_file ]] && kill "$(cat "$pid_file")" 2>/dev/null; done
  wait 2>/dev/null || true
  rm -rf "$work"
}
trap cleanup EXIT

# start NAME COMMAND...: runs a server in the background (its pid in
# $work/NAME.pid) and echoes its base URL.
start() {
  local name=$1
  shift
  "$@" >"$work/$name.log" 2>&1 &
  echo $! >"$work/$name.pid"
  for _ in $(seq 100); do grep -q '^listening on ' "$work/$name.log" && break; sleep 0.1; done
  sed -n 's/^listening on //p' "$work/$name.log" | grep . || { cat "$work/$name.log" >&2; exit 1; }
}

# stop NAME: ends a server started by `start`.
stop() {
  kill "$(cat "$work/$1.pid")" 2>/dev/null || true
  rm -f "$work/$1.pid"
}

# measure LABEL URL ENCODING: one wrk run with 4 slow-loris clients beside it.
measure() {
  local label=$1 url=$2 encoding=$3
  local host_port=${url#http://}
  host_port=${host_port%%/*}
  local seconds=${duration%s}
  python3 "$clients" slowloris "${host_port%:*}" "${host_port#*:}" 4 $((seconds + 2)) >"$work/loris.out" &
  local loris=$!
  sleep 1
  local header=()
  [[ $encoding == gzip ]] && header=(-H "Accept-Encoding: gzip")
  # One more scrape, alone on its own connection, halfway through.
  (sleep $((seconds / 2)); curl -s -o /dev/null -m 10 -w '%{http_code} in %{time_total} s' \
    "${header[@]}" "$url" >"$work/lone.out" || true) &
  local lone=$!
  local out
  out=$(wrk -t2 -c50 -d"$duration" --latency "${header[@]}" "$url")
  wait "$loris" "$lone"
  awk -v label="$label" -v loris="$(cat "$work/loris.out")" -v lone="$(cat "$work/lone.out")" '
    /Socket errors/ { gsub(",", ""); errors = $4 + $6 + $8 + $10 }
    /Non-2xx/ { non2xx = $5 }
    $1 == "50%" { p50 = $2 }
    $1 == "99%" { p99 = $2 }
    /Requests\/sec/ { rps = $2 }
    /requests in/ { total = $1 }
    END {
      printf "| %s | %d | %d | %d | %s | %s | %s | %s | %s |\n", label, total, errors + non2xx, non2xx, rps, p50, p99,
             lone, loris
    }
  ' <<<"$out"
}

echo "| server, GPUs, encoding, body | requests | failed | of which non-2xx | requests/s | p50 | p99 | a lone scrape | slow clients |"
echo "|---|---|---|---|---|---|---|---|---|"
for gpus in ${GPUS:-8 64}; do
  base=$(start "demo$gpus" "$demo" --gpus "$gpus" --dcgm --listen 127.0.0.1:0)
  for encoding in ${ENCODINGS:-identity gzip}; do
    curl -s -H "Accept-Encoding: $encoding" -o "$work/body" "${base}metrics"
    bytes=$(wc -c <"$work/body")
    floor_args=("$work/body")
    [[ $encoding == gzip ]] && floor_args+=(gzip)
    floor_base=$(start "floor$gpus$encoding" "$floor" "${floor_args[@]}")
    measure "agent, $gpus, $encoding, $bytes B" "${base}metrics" "$encoding"
    measure "floor, $gpus, $encoding, $bytes B" "${floor_base}metrics" "$encoding"
    stop "floor$gpus$encoding"
  done
  host_port=${base#http://}
  host_port=${host_port%/}
  burst_line=$(python3 "$clients" burst "${host_port%:*}" "${host_port#*:}" "${BURST:-1000}" /healthz)
  echo "burst of ${BURST:-1000} simultaneous connects, $gpus GPUs: $burst_line" >>"$work/bursts"
  stop "demo$gpus"
done
echo
cat "$work/bursts"
