#!/usr/bin/env bash
# Installs the Debian 12 packages gpudoctor needs to build and test, skipping
# those already present. Safe to run again. Runs apt-get as root (directly,
# or through sudo when run by another user).
set -euo pipefail

# Build and run time.
packages=(
  build-essential cmake ninja-build pkg-config
  libcli11-dev libfmt-dev nlohmann-json3-dev libtomlplusplus-dev libpugixml-dev
  libre2-dev libpcre2-dev libvectorscan-dev zlib1g-dev libsqlite3-dev libcurl4-openssl-dev libboost-dev
  clang-16
)
# Tests, fuzzing and benchmarks.
if [[ "${1:-}" == "--test" ]]; then
  packages+=(libgtest-dev libgmock-dev libcpp-httplib-dev clang libclang-rt-14-dev python3 sqlite3 chromium
             procps psmisc prometheus prometheus-alertmanager python3-yaml python3-jsonschema
             slurmctld slurmd slurm-client munge
             help2man dpkg-dev lintian debootstrap systemd  # the package: man pages, scripts/package-check.sh
             buildah curl)  # the image: scripts/build-image.sh
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

# sudo resets the environment, so the frontend is set on apt-get's command line.
apt_get=(env DEBIAN_FRONTEND=noninteractive apt-get)
if [[ $(id -u) -ne 0 ]]; then
  if ! command -v sudo >/dev/null; then
    echo "install-deps.sh: installing ${missing[*]} needs root: run it as root, or install sudo" >&2
    exit 1
  fi
  apt_get=(sudo "${apt_get[@]}")
fi
echo "Installing: ${missing[*]}" >&2
"${apt_get[@]}" update -q
"${apt_get[@]}" install -y -q --no-install-recommends "${missing[@]}"
