#!/usr/bin/env bash
# Installs the Debian 12 packages gpudoctor needs to build and test, skipping
# those already present. Safe to run again. Runs apt-get as root (directly,
# or through sudo when run by another user).
set -euo pipefail

# Build and run time.
packages=(
  build-essential cmake ninja-build pkg-config
  libcli11-dev libfmt-dev nlohmann-json3-dev libtomlplusplus-dev libpugixml-dev
  libre2-dev libvectorscan-dev zlib1g-dev libsqlite3-dev libcpp-httplib-dev
)
# Tests, fuzzing and benchmarks.
if [[ "${1:-}" == "--test" ]]; then
  packages+=(libgtest-dev libgmock-dev libbenchmark-dev clang libclang-rt-14-dev python3 sqlite3 chromium
             procps psmisc prometheus)
fi

missing=()
for package in "${packages[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$package" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$package")
  fi
done
if ((${#missing[@]} == 0)); then
  exit 0
fi

as_root=()
if [[ $(id -u) -ne 0 ]]; then
  as_root=(sudo)
fi
echo "Installing: ${missing[*]}" >&2
export DEBIAN_FRONTEND=noninteractive
"${as_root[@]}" apt-get update -q
"${as_root[@]}" apt-get install -y -q --no-install-recommends "${missing[@]}"
