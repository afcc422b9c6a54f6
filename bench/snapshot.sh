#!/usr/bin/env bash
# Snapshot cost: gpudoctor's hang-proof collector against the floor (a C program
# calling the same NVML functions in-process), both on the fake NVML library
# with the 8-GPU healthy scenario.
#
#   bench/snapshot.sh [BUILD_DIR] [SNAPSHOTS] [ROUNDS]     (defaults: build, 2000, 5)
#
# The two alternate for ROUNDS rounds of SNAPSHOTS snapshots each, so both see
# the same machine; each round's figures are printed, then the ratio of the
# best (lowest) CPU time of each, which a busy shared machine distorts least.
set -euo pipefail
build=${1:-build}
snapshots=${2:-2000}
rounds=${3:-5}
root=$(cd "$(dirname "$0")/.." && pwd)
lib=$build/bin/libgpudoctor_fake_nvml.so
scenario=$root/examples/healthy-8xh100.toml
export GPUDOCTOR_SCENARIO=$scenario GPUDOCTOR_FAKE_NOW=60s
best_floor="" best_ours=""
for round in $(seq 1 "$rounds"); do
  floor=$("$build/bin/nvml_floor" "$lib" "$snapshots")
  ours=$("$build/bin/snapshot_bench" "$build/bin/gpudoctor" "$lib" "$scenario" "$snapshots")
  floor_us=$(sed -E 's/.*floor_cpu_us_per_snapshot=([0-9.]+).*/\1/' <<<"$floor")
  ours_us=$(sed -E 's/.*cpu_us_per_snapshot=([0-9.]+).*/\1/' <<<"$ours")
  echo "round $round  floor: $floor"
  echo "round $round  gpudoctor: $ours"
  best_floor=$(awk -v a="$floor_us" -v b="${best_floor:-$floor_us}" 'BEGIN { print (a < b ? a : b) }')
  best_ours=$(awk -v a="$ours_us" -v b="${best_ours:-$ours_us}" 'BEGIN { print (a < b ? a : b) }')
done
awk -v a="$best_ours" -v b="$best_floor" \
  'BEGIN { printf "best of each: gpudoctor %.1f us, floor %.1f us per snapshot; ratio %.2f\n", a, b, a / b }'
