#!/usr/bin/env bash
# Snapshot cost: gpudoctor's hang-proof collector against the floor (a C program
# calling the same NVML functions in-process), both on the fake NVML library
# with the 8-GPU healthy scenario. A third program, ipc_floor, measures what one
# request and its answer between two processes cost on this machine with
# nothing else done, the answering process first working as long as the floor
# took in that round (that work left out): the part of the gap that any
# isolated collector pays.
#
#   bench/snapshot.sh [BUILD_DIR] [SNAPSHOTS] [ROUNDS]     (defaults: build, 2000, 5)
#   BUILD_DIR must be configured with -DGPUDOCTOR_BENCH=ON (docs/benchmarks.md).
#
# The programs alternate for ROUNDS rounds of SNAPSHOTS snapshots each, so all
# see the same machine; each round's figures are printed, then the ratio of the
# best (lowest) CPU time of each, which a busy shared machine distorts least.
set -euo pipefail
build=${1:-build}
snapshots=${2:-2000}
rounds=${3:-5}
root=$(cd "$(dirname "$0")/.." && pwd)
lib=$build/bin/libgpudoctor_fake_nvml.so
scenario=$root/examples/healthy-8xh100.toml
# The probe's answer for this scenario: the host, 8 GPU frames and the end,
# 8,987 bytes (measured with `gpudoctor __probe`, docs/benchmarks.md).
answer_bytes=8987
export GPUDOCTOR_SCENARIO=$scenario GPUDOCTOR_FAKE_NOW=60s
best_floor="" best_ours="" best_ipc=""
ratios=()
lowest() { awk -v a="$1" -v b="${2:-$1}" 'BEGIN { print (a < b ? a : b) }'; }
for round in $(seq 1 "$rounds"); do
  floor=$("$build/bin/nvml_floor" "$lib" "$snapshots")
  floor_work=$(sed -E 's/.*floor_cpu_us_per_snapshot=([0-9.]+).*/\1/' <<<"$floor")
  ipc=$("$build/bin/ipc_floor" "$snapshots" "$answer_bytes" "$floor_work")
  ours=$("$build/bin/snapshot_bench" "$build/bin/gpudoctor-probe" "$lib" "$scenario" "$snapshots")
  floor_us=$(sed -E 's/.*floor_cpu_us_per_snapshot=([0-9.]+).*/\1/' <<<"$floor")
  ipc_us=$(sed -E 's/.*ipc_cpu_us_per_round_trip=([0-9.]+).*/\1/' <<<"$ipc")
  ours_us=$(sed -E 's/.*cpu_us_per_snapshot=([0-9.]+).*/\1/' <<<"$ours")
  echo "round $round  floor: $floor"
  echo "round $round  ipc floor: $ipc"
  echo "round $round  gpudoctor: $ours"
  best_floor=$(lowest "$floor_us" "$best_floor")
  best_ipc=$(lowest "$ipc_us" "$best_ipc")
  best_ours=$(lowest "$ours_us" "$best_ours")
  ratios+=("$(awk -v a="$ours_us" -v b="$floor_us" 'BEGIN { printf "%.3f", a / b }')")
done
awk -v a="$best_ours" -v b="$best_floor" -v c="$best_ipc" 'BEGIN {
  printf "best of each: gpudoctor %.1f us, floor %.1f us, ipc floor %.1f us per snapshot\n", a, b, c
  printf "ratio to the floor %.2f; to floor + ipc floor (%.1f us) %.2f\n", a / b, b + c, a / (b + c) }'
# Each round's own ratio pairs figures measured moments apart; their median
# is the figure a noisy machine moves least.
printf '%s\n' "${ratios[@]}" | sort -n | awk '{ r[NR] = $1 } END {
  m = NR % 2 ? r[(NR + 1) / 2] : (r[NR / 2] + r[NR / 2 + 1]) / 2
  printf "ratio to the floor, round by round: from %.2f to %.2f, median %.2f\n", r[1], r[NR], m }'
