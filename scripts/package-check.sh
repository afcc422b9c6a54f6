#!/usr/bin/env bash
# Builds gpudoctor's Debian package and proves it: lintian reports no error, systemd accepts the agent's unit,
# the programs are hardened (PIE, stack protector, fortified calls, full RELRO), and on a fresh minbase Debian 12
# chroot (scripts/lib/debian-chroot.sh) the package installs with apt, runs `gpudoctor --version` and
# `gpudoctor check` from /usr/bin, keeps the agent's history across an upgrade from the previous version, with
# that history turned back into the oldest schema (1) so that the new agent must migrate it and lose nothing,
# keeps it on removal and deletes it on purge.
#
#   scripts/package-check.sh [OPTIONS]
#
#   --build DIR      build folder (default: build-pkg), configured as the product build is (RelWithDebInfo)
#   --jobs N         build jobs (default: the number of CPUs)
#   --previous DEB   the previous release's package to upgrade from (default: this build's package repacked
#                    as VERSION~previous, which dpkg orders before VERSION: the product is built once)
#   --out DIR        also leave this version's package and its -dbgsym in DIR (they stay in the build folder)
#   --keep           keep the chroot afterwards (default: delete it; the logs are kept either way)
#   --dir DIR        work folder, absent or empty, outside the repository (default: a new one in /var/tmp)
#   --base FILE      tarball of the fresh debootstrap tree, shared with fresh-check.sh
#                    (default: /var/tmp/gpudoctor-fresh-bookworm.tar)
#   --fresh-base     run debootstrap again and replace that tarball
#   --mirror URL     Debian mirror (default: http://deb.debian.org/debian)
#   --base-only      only make that tarball when it is missing, and exit (scripts/test.sh runs this while it
#                    builds: debootstrap waits on the mirror more than on the CPUs)
#   -h, --help       this text
#
# Needs root (debootstrap, chroot and mounts), network access to the mirror, and the packages of
# `scripts/install-deps.sh --test` (lintian, help2man, dpkg-dev, debootstrap, systemd, sqlite3).
#
# Exit status: 0 when every check passed, 1 when one failed, 2 when this script could not run.
set -euo pipefail

repo=$(cd "$(dirname "$0")/.." && pwd)
# shellcheck source=lib/debian-chroot.sh
source "$repo/scripts/lib/debian-chroot.sh"
build=$repo/build-pkg
jobs=$(nproc)
previous_deb=""
base_only=false
out=""
readonly unit=/lib/systemd/system/gpudoctor-agent.service
readonly history=/var/lib/gpudoctor/history.db
# A machine with findings (temperature, throttling), so that the history holds findings for the upgrade to keep.
readonly scenario=/usr/share/doc/gpudoctor/examples/overheating.toml
# What schema version 1 had (src/store/schema.cc): every later table and column is dropped to make a history
# as the first agent wrote it.
readonly schema1_tables="'gpus', 'samples_raw', 'process_memory', 'downsample_progress', 'findings', 'samples_1m',
  'samples_1h', 'schema_migrations', 'sqlite_sequence'"
readonly schema1_finding_columns="'id', 'incident_key', 'rule_id', 'gpu_index', 'gpu_uuid', 'gpu_pci_bus_id',
  'gpu_serial', 'has_gpu', 'severity', 'summary', 'evidence', 'cause', 'actions', 'opened_at', 'last_seen',
  'resolved_at', 'state'"
readonly schema1_gpu_columns="'id', 'gpu_index', 'uuid', 'last_seen'"

usage() { sed -n '2,/^set -euo/{/^set -euo/d;s/^# \{0,1\}//;p}' "$0"; }
die() { echo "package-check: $*" >&2; exit 2; }

parse_options() {
  while (($#)); do
    case $1 in
      --build) [[ -n ${2:-} ]] || die "--build needs a folder"; build=$(realpath -m "$2"); shift ;;
      --jobs) [[ ${2:-} =~ ^[1-9][0-9]*$ ]] || die "--jobs needs a number"; jobs=$2; shift ;;
      --previous) [[ -f ${2:-} ]] || die "--previous needs a .deb file"; previous_deb=$(realpath "$2"); shift ;;
      --out) [[ -n ${2:-} ]] || die "--out needs a folder"; out=$(realpath -m "$2"); shift ;;
      --base-only) base_only=true ;;
      -h | --help) usage; exit 0 ;;
      *) take_chroot_option "$@"; shift $((chroot_option_used - 1)) ;;
    esac
    shift
  done
}

failures=0
summary=()
# check NAME COMMAND...: runs COMMAND, records NAME as passed or FAILED.
check() {
  local name=$1
  shift
  if "$@"; then
    summary+=("passed  $name")
  else
    summary+=("FAILED  $name")
    failures=$((failures + 1))
  fi
}

# build_package: the package of this tree, copied to $work/debs; prints the .deb's path.
build_package() {
  # The maintainer is whoever builds it (cmake/packaging.cmake: DEBFULLNAME and DEBEMAIL, else the commit's
  # author). A tree with neither (a source tarball, no history) has none, and CPack refuses to build; the
  # package this check builds, installs and throws away then names the check as its maintainer, at a domain
  # that cannot exist (RFC 2606).
  local maintainer=()
  if ! grep -q '^GPUDOCTOR_PACKAGE_MAINTAINER:STRING=.' "$build/CMakeCache.txt" 2>/dev/null &&
    [[ -z ${DEBEMAIL:-} ]] && ! git -C "$repo" -c safe.directory='*' log -1 --format=%ae >/dev/null 2>&1; then
    maintainer=(-DGPUDOCTOR_PACKAGE_MAINTAINER="gpudoctor package check <package-check@gpudoctor.invalid>")
    echo "package-check: no DEBEMAIL and no commit author here; the package names the check as its maintainer" >&2
  fi
  # A unity build, as the sanitizer build of scripts/test.sh is: the product's sources are batched into the same
  # files as the tested ones were, and it builds in about two thirds of the time.
  cmake -S "$repo" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCMAKE_UNITY_BUILD=ON \
    -DGPUDOCTOR_TESTS=OFF -DGPUDOCTOR_BENCH=OFF -DGPUDOCTOR_VERSION= "${maintainer[@]}" >"$work/configure.log" 2>&1 ||
    { tail -20 "$work/configure.log" >&2; return 1; }
  cmake --build "$build" -j"$jobs" --target package >"$work/package.log" 2>&1 ||
    { tail -30 "$work/package.log" >&2; return 1; }
  local made
  made=$(sed -n 's/^CPack: - package: \(.*\.deb\) generated\.$/\1/p' "$work/package.log")
  [[ -f $made ]] || { echo "no .deb in $work/package.log" >&2; return 1; }
  local name=${made##*/}
  local dbgsym=${name/#gpudoctor_/gpudoctor-dbgsym_}
  cp "$made" "$work/debs/"
  [[ ! -f ${made%/*}/${dbgsym%.deb}.ddeb ]] || cp "${made%/*}/${dbgsym%.deb}.ddeb" "$work/debs/"
  echo "$work/debs/$name"
}

# repack DEB VERSION: DEB with its control's Version set to VERSION, copied to $work/debs; prints its path.
# The contents stay the same binaries: what an upgrade tests is dpkg's and the maintainer scripts' handling of
# an older version, and the history an older agent left (seeded apart, in the oldest schema).
repack() {
  local deb=$1 version=$2 tree=$work/repack name
  name=gpudoctor_${version}_$(dpkg-deb -f "$deb" Architecture).deb
  rm -rf "$tree" && dpkg-deb -R "$deb" "$tree" || return 1
  sed -i "s/^Version: .*/Version: $version/" "$tree/DEBIAN/control"
  dpkg-deb --root-owner-group -b "$tree" "$work/debs/$name" >/dev/null || return 1
  rm -rf "$tree"
  echo "$work/debs/$name"
}

# tables_beyond DB KEPT, columns_beyond DB TABLE KEPT: the tables (a table's columns) DB has beyond KEPT.
tables_beyond() { sqlite3 "$1" "SELECT name FROM sqlite_schema WHERE type = 'table' AND name NOT IN ($2)"; }
columns_beyond() { sqlite3 "$1" "SELECT name FROM pragma_table_info('$2') WHERE name NOT IN ($3)"; }

# downgrade_history DB: the agent's history turned back into schema version 1, as the first release wrote it.
downgrade_history() {
  local db=$1 name
  for name in $(tables_beyond "$db" "$schema1_tables"); do sqlite3 "$db" "DROP TABLE $name" || return 1; done
  for name in $(columns_beyond "$db" findings "$schema1_finding_columns"); do
    sqlite3 "$db" "ALTER TABLE findings DROP COLUMN $name" || return 1
  done
  for name in $(columns_beyond "$db" gpus "$schema1_gpu_columns"); do
    sqlite3 "$db" "ALTER TABLE gpus DROP COLUMN $name" || return 1
  done
  sqlite3 "$db" "DELETE FROM schema_migrations WHERE version > 1; PRAGMA wal_checkpoint(TRUNCATE);" >/dev/null
}

# The history's rows an upgrade must keep: samples, GPUs and findings ("samples|gpus|findings").
history_rows() {
  sqlite3 "$root$history" "SELECT (SELECT count(*) FROM samples_raw) || '|' || (SELECT count(*) FROM gpus) || '|' ||
                                   (SELECT count(*) FROM findings)"
}

# After the previous agent: its history as schema 1, with what it holds noted for after the upgrade.
seed_old_history() {
  downgrade_history "$root$history" || return 1
  history_rows >"$work/rows-before" && echo "    $(schema_of_history) history rows (samples|gpus|findings):" \
    "$(cat "$work/rows-before")"
  [[ $(sqlite3 "$root$history" "SELECT max(version) FROM schema_migrations") == 1 ]] &&
    (($(cut -d'|' -f3 "$work/rows-before") > 0))  # findings to migrate
}

schema_of_history() { echo "schema $(sqlite3 "$root$history" "SELECT max(version) FROM schema_migrations")"; }

# After the current agent: every migration applied, and every row of before still there.
check_migrated_history() {
  local before after
  before=$(cat "$work/rows-before") after=$(history_rows)
  echo "    $(schema_of_history); rows (samples|gpus|findings) before the upgrade $before, now $after"
  [[ $(sqlite3 "$root$history" "SELECT max(version) FROM schema_migrations") == "$(schema_version)" ]] || return 1
  sqlite3 "$root$history" "SELECT serial, pci_bus_id, name FROM gpus" >/dev/null || return 1
  local i
  for i in 1 2 3; do
    (($(cut -d'|' -f$i <<<"$after") >= $(cut -d'|' -f$i <<<"$before"))) || return 1
  done
}

# The history schema this tree writes (kSchemaVersion).
schema_version() {
  sed -n 's/.*constexpr int kSchemaVersion = \([0-9]*\);.*/\1/p' "$repo/src/store/schema.h"
}

project_version() {
  sed -n 's/^project(gpudoctor VERSION \([^ ]*\) .*/\1/p' "$repo/CMakeLists.txt"
}

# What a Debian package must be, read from the .deb itself.
lint() {
  # The tags lintian gives any package made outside a Debian source package, none of them an error.
  local status=0
  lintian --fail-on error --display-info --no-tag-display-limit "$1" >"$work/lintian.log" 2>&1 || status=$?
  grep -E '^[EW]: |hardening' "$work/lintian.log" | sed 's/^/    /' || true
  # lintian's hardening tags are information only; here they fail the check.
  ! grep -q 'hardening-' "$work/lintian.log" && return $status
}

# The unit as the package installs it, with its programs and man pages: verify insists that ExecStart exists
# and reads Documentation=man:... with man, so both are pointed at the package's files.
verify_unit() {
  local tree=$work/extracted
  rm -rf "$tree" && mkdir -p "$tree/verify" && dpkg-deb -x "$1" "$tree"
  sed "s|/usr/bin/gpudoctor|$tree/usr/bin/gpudoctor|g" "$tree$unit" >"$tree/verify/${unit##*/}"
  MANPATH=$tree/usr/share/man systemd-analyze verify "$tree/verify/${unit##*/}" >"$work/systemd-verify.log" 2>&1 &&
    [[ ! -s $work/systemd-verify.log ]] || { sed 's/^/    /' "$work/systemd-verify.log"; return 1; }
}

# Stripped programs and modules, their debug symbols in the -dbgsym package, and no build-only or NVIDIA
# package among the dependencies.
inspect_package() {
  local deb=$1 tree=$work/extracted depends file
  depends=$(dpkg-deb -f "$deb" Depends)
  echo "    Depends: $depends"
  if grep -Eq '(-dev|clang|nvidia|cuda)([ ,(]|$)' <<<"$depends"; then
    echo "    a build-only or NVIDIA package is a dependency"
    return 1
  fi
  for file in "$tree"/usr/bin/* "$tree"/usr/lib/gpudoctor/*; do
    if readelf -S "$file" | grep -q '\.debug_info'; then
      echo "    $file is not stripped"
      return 1
    fi
  done
  ls "$work"/debs/gpudoctor-dbgsym_*.ddeb >/dev/null 2>&1 || { echo "    no -dbgsym package"; return 1; }
}

# Every program and module of the package as dpkg-buildflags' hardening=+all makes them: position-independent,
# full RELRO (relocations read-only, bound at start-up), and the programs with the stack protector and fortified
# libc calls (what hardening-check looks for), read from the extracted package.
check_hardening() {
  local tree=$work/extracted file headers dynamic symbols bad=0
  for file in "$tree"/usr/bin/* "$tree"/usr/lib/gpudoctor/*.so; do
    headers=$(readelf -lhW "$file") dynamic=$(readelf -dW "$file") symbols=$(readelf --dyn-syms -W "$file")
    grep -q 'Type: *DYN' <<<"$headers" || { echo "    ${file#"$tree"}: not position-independent"; bad=1; }
    grep -q 'GNU_RELRO' <<<"$headers" || { echo "    ${file#"$tree"}: no RELRO"; bad=1; }
    grep -Eq 'BIND_NOW|FLAGS.*NOW' <<<"$dynamic" || { echo "    ${file#"$tree"}: not bound now"; bad=1; }
    [[ $file == */usr/bin/* ]] || continue
    grep -q 'PIE' <<<"$dynamic" || { echo "    ${file#"$tree"}: not a PIE"; bad=1; }
    grep -q '__stack_chk_fail' <<<"$symbols" || { echo "    ${file#"$tree"}: no stack protector"; bad=1; }
    grep -Eq '__[a-z_]+_chk@' <<<"$symbols" || { echo "    ${file#"$tree"}: no fortified call"; bad=1; }
  done
  ((bad == 0)) && echo "    PIE, full RELRO, stack protector and fortified calls in every program"
}

# chroot_step NAME COMMAND: runs COMMAND as root in the chroot, its output in the log and its last lines shown
# (without dpkg's progress); records the outcome.
chroot_step() {
  local name=$1 command=$2
  echo "== $name" | tee -a "$work/chroot.log"
  check "$name" in_chroot root / "set -euo pipefail; $command" >"$work/step.log" 2>&1
  cat "$work/step.log" >>"$work/chroot.log"
  grep -v 'Reading database' "$work/step.log" | tail -n 3 | sed 's/^/    /'
}

# Shell text: the number of samples the history holds, read by `gpudoctor history` (its --json rows).
readonly count_samples="gpudoctor history --db $history --metric temperature_c --since 1h --json |
  grep -o '\"t\":' | wc -l"
# Shell text: the agent for a few seconds on a simulated machine, as the unit runs it, then SIGTERM.
readonly run_agent="mkdir -p /var/lib/gpudoctor && timeout --preserve-status -s TERM 8 gpudoctor agent \
  --simulate $scenario --interval 1s --listen 127.0.0.1:0 --log none --db $history"

main() {
  parse_options "$@"
  [[ $(id -u) -eq 0 ]] || die "needs root (debootstrap, chroot and mounts): run it as root or with sudo"
  local tool
  for tool in cmake ninja lintian dpkg-deb dpkg-shlibdeps systemd-analyze readelf help2man unshare chroot tar \
    sqlite3; do
    command -v "$tool" >/dev/null || die "needs $tool (scripts/install-deps.sh --test installs it)"
  done
  if $base_only; then
    if [[ -f $base ]] && ! $fresh_base; then
      echo "== $base is already there"
    else
      prepare_work_folder gpudoctor-package
      trap cleanup EXIT
      make_base
    fi
    return 0
  fi
  local start=$SECONDS
  prepare_work_folder gpudoctor-package
  mkdir "$work/debs"
  trap cleanup EXIT

  local version previous current
  version=$(project_version)
  echo "== building the package in $build (logs in $work)"
  current=$(build_package) || die "building the package failed"
  if [[ -n $previous_deb ]]; then
    previous=$previous_deb
  else
    previous=$(repack "$current" "$version~previous") || die "repacking the package as $version~previous failed"
  fi
  echo "    previous: ${previous##*/}; current: ${current##*/} ($(du -k "$current" | cut -f1) KiB," \
    "installed $(dpkg-deb -f "$current" Installed-Size) KiB)"

  echo "== lintian"
  check "lintian: no error" lint "$current"
  echo "== systemd-analyze verify $unit"
  check "systemd-analyze verify" verify_unit "$current"
  echo "== stripped, debug symbols apart, dependencies"
  check "stripped, -dbgsym, dependencies" inspect_package "$current"
  echo "== hardening"
  check "hardened: PIE, RELRO, bind now, stack protector, fortify" check_hardening

  make_fresh_tree
  mkdir -p "$root/tmp/debs"
  cp "$previous" "$root/tmp/debs/previous.deb"
  cp "$current" "$root/tmp/debs/current.deb"
  : >"$work/chroot.log"
  chroot_step "install the previous package with apt" \
    "apt-get update -q && DEBIAN_FRONTEND=noninteractive apt-get install -y -q /tmp/debs/previous.deb"
  chroot_step "run the previous agent, which writes history" \
    "$run_agent; samples=\$($count_samples); echo \"samples: \$samples\"; ((samples > 0)); echo \$samples >/tmp/samples"
  echo "== the history turned back into schema 1, as the first release wrote it" | tee -a "$work/chroot.log"
  check "the history in schema 1" seed_old_history
  chroot_step "upgrade to the current package with apt" \
    "DEBIAN_FRONTEND=noninteractive apt-get install -y -q /tmp/debs/current.deb &&
     gpudoctor --version | head -1 | grep -qx 'gpudoctor $version'"
  chroot_step "gpudoctor --version and --version --json from /usr/bin" \
    "[[ \$(command -v gpudoctor) == /usr/bin/gpudoctor ]] && gpudoctor --version &&
     gpudoctor --version --json | grep -q '\"path\": \"/usr/lib/gpudoctor/libgpudoctor_http_server.so\"'"
  chroot_step "gpudoctor check from /usr/bin gives a verdict" \
    "status=0; gpudoctor check || status=\$?; echo \"check: exit \$status\"; ((status <= 3))"
  chroot_step "the history is still there and read" \
    "samples=\$($count_samples); echo \"samples: \$samples, before the upgrade: \$(cat /tmp/samples)\";
     ((samples >= \$(cat /tmp/samples)))"
  chroot_step "the current agent opens the history and adds to it" \
    "$run_agent; samples=\$($count_samples); echo \"samples: \$samples\"; ((samples > \$(cat /tmp/samples)))"
  echo "== the history migrated to schema $(schema_version), nothing lost" | tee -a "$work/chroot.log"
  check "the history migrated, nothing lost" check_migrated_history
  chroot_step "remove: the programs go, the history and the config stay" \
    "DEBIAN_FRONTEND=noninteractive apt-get remove -y -q gpudoctor && [[ ! -e /usr/bin/gpudoctor ]] &&
     [[ -s $history ]] && [[ -f /etc/gpudoctor/config.toml ]]"
  chroot_step "purge: the history and the config go" \
    "DEBIAN_FRONTEND=noninteractive apt-get purge -y -q gpudoctor && [[ ! -e /var/lib/gpudoctor ]] &&
     [[ ! -e /etc/gpudoctor ]]"

  if [[ -n $out ]]; then
    mkdir -p "$out" && cp "$current" "${current%/*}"/gpudoctor-dbgsym_*.ddeb "$out/"
  fi
  echo "== summary ($((SECONDS - start)) s; logs in $work)"
  printf '%s\n' "${summary[@]}"
  ((failures == 0))
}

main "$@"
