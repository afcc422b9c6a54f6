#!/usr/bin/env bash
# Builds gpudoctor with warnings as errors under AddressSanitizer and
# UndefinedBehaviorSanitizer and runs the whole test suite on that build, then
# builds the libFuzzer targets and runs each one briefly, then builds the product
# once as the Debian package and proves it on a fresh Debian 12
# (scripts/package-check.sh) and as the container image (scripts/build-image.sh).
#
#   scripts/test.sh            the full run (what CI runs); the package and the image need root
#                              and the Debian mirror, and are skipped, saying so, without root
#   scripts/test.sh --quick    an optimised build of the tests and benchmarks in build-dev/, and the
#                              tests, without sanitizers or fuzzing (build/ stays the product alone)
#
# Tests that need an NVIDIA GPU are reported as skipped, never as passed.
set -euo pipefail
cd "$(dirname "$0")/.."
jobs=$(nproc)

run_tests() {
  (cd "$1" && ctest --output-on-failure -j"$jobs" --timeout 300)
}

if [[ "${1:-}" == "--quick" ]]; then
  echo "== build (warnings are errors) and test"
  cmake -S . -B build-dev -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DGPUDOCTOR_WERROR=ON \
    -DGPUDOCTOR_TESTS=ON -DGPUDOCTOR_BENCH=ON >/dev/null
  cmake --build build-dev -j"$jobs"
  run_tests build-dev
  exit 0
fi

# The package check's fresh Debian tree is made meanwhile, as root: debootstrap waits on the mirror more than on
# the CPUs. The package check makes it itself if this fails.
base_pid=""
if [[ $(id -u) -eq 0 ]]; then
  base_log=$(mktemp)
  scripts/package-check.sh --base-only >"$base_log" 2>&1 &
  base_pid=$!
fi

echo "== build (warnings are errors) under AddressSanitizer + UndefinedBehaviorSanitizer, and test"
# -g1 keeps line numbers for sanitizer reports at a fraction of the build time of -g. A unity build
# (each target's sources compiled a few at a time, as one file) parses the shared headers once per batch:
# about 40% less compiler time than file by file, so names private to a file must not clash within its
# target; this build is where a clash shows.
cmake -S . -B build-sanitize -G Ninja -DCMAKE_BUILD_TYPE=Debug -DCMAKE_C_FLAGS_DEBUG=-g1 -DCMAKE_CXX_FLAGS_DEBUG=-g1 \
  -DCMAKE_UNITY_BUILD=ON -DGPUDOCTOR_WERROR=ON -DGPUDOCTOR_SANITIZE=ON -DGPUDOCTOR_TESTS=ON -DGPUDOCTOR_BENCH=OFF \
  >/dev/null
cmake --build build-sanitize -j"$jobs"
ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 run_tests build-sanitize

echo "== fuzz targets (short smoke run each)"
CC=clang CXX=clang++ cmake -S . -B build-fuzz -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DGPUDOCTOR_FUZZ=ON \
  -DGPUDOCTOR_TESTS=OFF -DGPUDOCTOR_BENCH=OFF >/dev/null
cmake --build build-fuzz -j"$jobs" --target fuzz_targets
# One target per CPU at a time; each prints its line when it ends, and a failure
# prints the end of its log and fails the run once every target has ended.
fuzz_one() {
  local target=$1 corpus_dir seeds
  corpus_dir=$(mktemp -d)
  # Seeds: real inputs from the test data, so the run starts from valid files.
  case $(basename "$target") in
    fuzz_smi) seeds=(testdata/nvidia_smi testdata/health/nvidia_smi testdata/captures/nvlink_e testdata/captures/topo_m
                    testdata/fuzz_seeds/fuzz_smi) ;;
    fuzz_dcgmi) seeds=(testdata/captures/dcgmi_diag testdata/captures/dcgmi_health testdata/captures/gpu_burn) ;;
    fuzz_logs) seeds=(testdata/kernel_logs) ;;
    fuzz_config) seeds=(testdata/fuzz_seeds/fuzz_config data) ;;  # the defaults, docs' examples, the catalog
    fuzz_scenario) seeds=(examples) ;;
    *) seeds=("testdata/fuzz_seeds/$(basename "$target")") ;;
  esac
  [[ -d ${seeds[0]} ]] || seeds=()
  if ! "$target" -max_total_time="${FUZZ_SECONDS:-20}" -rss_limit_mb=2048 "$corpus_dir" "${seeds[@]}" \
    >"$corpus_dir.log" 2>&1; then
    echo "$(tail -50 "$corpus_dir.log")"$'\n'"fuzz target $target failed"
    return 1
  fi
  echo "$(basename "$target"): $(grep -Eo 'Done [0-9]+ runs' "$corpus_dir.log" || echo ran)"
}
# Waits for the targets by their ids: `wait -n` alone may return for the Debian tree made meanwhile.
declare -A fuzzing=()  # pid -> target
fuzz_failed=0
reap_fuzz_target() {
  local ended=""
  wait -n -p ended "${!fuzzing[@]}" || fuzz_failed=1
  [[ -n $ended ]] || { echo "lost track of the fuzz targets: ${fuzzing[*]}"; exit 1; }
  unset "fuzzing[$ended]"
}
for target in build-fuzz/bin/fuzz_*; do
  while ((${#fuzzing[@]} >= jobs)); do reap_fuzz_target; done
  fuzz_one "$target" &
  fuzzing[$!]=$target
done
while ((${#fuzzing[@]} > 0)); do reap_fuzz_target; done
((fuzz_failed == 0)) || exit 1

echo "== the Debian package (scripts/package-check.sh) and the container image (scripts/build-image.sh)"
if [[ $(id -u) -ne 0 ]]; then
  echo "SKIPPED: the package check and the image need root (debootstrap, chroot, buildah)"
  exit 0
fi
if ! wait "$base_pid"; then
  echo "making the fresh Debian tree ahead of the package check failed:"
  tail -20 "$base_log"
fi
packages=$(mktemp -d /var/tmp/gpudoctor-ci-packages.XXXXXX)
scripts/package-check.sh --jobs "$jobs" --out "$packages"
scripts/build-image.sh --deb "$(echo "$packages"/gpudoctor_*_amd64.deb)"
rm -rf "$packages"
