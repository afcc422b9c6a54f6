#!/usr/bin/env bash
# Snapshot cost: gpudoctor's hang-proof collector against the floor (a C program
# calling the same NVML functions in-process), both on the fake NVML library
# with the 8-GPU healthy scenario. Usage: bench/snapshot.sh [BUILD_DIR] [SNAPSHOTS]
set -euo pipefail
build=${1:-build}
snapshots=${2:-2000}
root=$(cd "$(dirname "$0")/.." && pwd)
lib=$build/bin/libgpudoctor_fake_nvml.so
scenario=$root/examples/healthy-8xh100.toml
export GPUDOCTOR_SCENARIO=$scenario GPUDOCTOR_FAKE_NOW=60s
floor=$("$build/bin/nvml_floor" "$lib" "$snapshots")
ours=$("$build/bin/snapshot_bench" "$build/bin/gpudoctor" "$lib" "$scenario" "$snapshots")
floor_us=$(sed -E 's/.*floor_cpu_us_per_snapshot=([0-9.]+).*/\1/' <<<"$floor")
ours_us=$(sed -E 's/.*cpu_us_per_snapshot=([0-9.]+).*/\1/' <<<"$ours")
echo "floor:     $floor"
echo "gpudoctor: $ours"
awk -v a="$ours_us" -v b="$floor_us" 'BEGIN { printf "ratio (gpudoctor / floor CPU per snapshot): %.2f\n", a / b }'
