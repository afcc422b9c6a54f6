#!/usr/bin/env bash
# Builds gpudoctor with warnings as errors and runs the whole test suite, then
# again under AddressSanitizer and UndefinedBehaviorSanitizer, then a short
# run of every fuzz target. Usage: scripts/test.sh [--quick]  (--quick: first pass only)
set -euo pipefail
cd "$(dirname "$0")/.."
jobs=$(nproc)

echo "== build (warnings are errors) and test"
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DGPUDOCTOR_WERROR=ON >/dev/null
cmake --build build -j"$jobs"
(cd build && ctest --output-on-failure -j"$jobs")

if [[ "${1:-}" == "--quick" ]]; then
  exit 0
fi

echo "== build and test under AddressSanitizer + UndefinedBehaviorSanitizer"
cmake -S . -B build-sanitize -G Ninja -DCMAKE_BUILD_TYPE=Debug -DGPUDOCTOR_WERROR=ON -DGPUDOCTOR_SANITIZE=ON \
  -DGPUDOCTOR_BENCH=OFF >/dev/null
cmake --build build-sanitize -j"$jobs"
(cd build-sanitize && ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
  ctest --output-on-failure -j"$jobs")

echo "== fuzz targets (short smoke run each)"
CC=clang CXX=clang++ cmake -S . -B build-fuzz -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DGPUDOCTOR_FUZZ=ON \
  -DGPUDOCTOR_TESTS=OFF -DGPUDOCTOR_BENCH=OFF >/dev/null
cmake --build build-fuzz -j"$jobs" --target fuzz_targets
for target in build-fuzz/bin/fuzz_*; do
  corpus_dir=$(mktemp -d)
  seeds="testdata/fuzz_seeds/$(basename "$target")"
  "$target" -max_total_time="${FUZZ_SECONDS:-20}" -rss_limit_mb=2048 "$corpus_dir" ${seeds:+$( [[ -d $seeds ]] && echo "$seeds")} \
    >"$corpus_dir.log" 2>&1 || { tail -50 "$corpus_dir.log"; echo "fuzz target $target failed"; exit 1; }
  echo "$(basename "$target"): $(grep -Eo 'Done [0-9]+ runs' "$corpus_dir.log" || echo ran)"
done
