#!/usr/bin/env bash
# Builds gpudoctor's container image (OCI) from its Debian package with buildah, on no base image: the package
# is installed with apt in a fresh minbase Debian 12 tree (scripts/lib/debian-chroot.sh, the tarball that
# package-check.sh and fresh-check.sh share), and the image holds the package's programs, modules, config and
# examples, and journalctl (the agent's kernel log in a container), with exactly the libraries they load (ldd),
# a passwd with root, and CA certificates for webhooks.
# No registry is used. Then it proves the image: `gpudoctor check --simulate` and the agent answering /healthz,
# run with `buildah run --isolation chroot`, and the Kubernetes manifests checked against it
# (tests/kubernetes/check_image.py: the image's name, command, plugin, ports and user).
#
#   scripts/build-image.sh --deb FILE [OPTIONS]
#
#   --deb FILE       the package (default: the one gpudoctor_*_amd64.deb in build-pkg/)
#   --name NAME      the image's name (default: gpudoctor:VERSION, VERSION read from the package), pushed with
#                    buildah push (below; docs/kubernetes.md, "The images")
#   --npd FILE       also build NAME-npd (gpudoctor-npd:VERSION): the image with node-problem-detector's
#                    program FILE as /node-problem-detector, for deploy/kubernetes/npd-gpudoctor-daemonset.yaml
#   --no-test        build only
#   --storage-driver DRIVER  buildah's storage driver (default: vfs, which works everywhere; overlay is faster
#                    where the kernel allows it); the image is kept in /var/lib/containers/storage
#   --keep           keep the chroot afterwards (default: delete it; the logs are kept either way)
#   --dir DIR        work folder, absent or empty, outside the repository (default: a new one in /var/tmp)
#   --base FILE      tarball of the fresh debootstrap tree (default: /var/tmp/gpudoctor-fresh-bookworm.tar)
#   --fresh-base     run debootstrap again and replace that tarball
#   --mirror URL     Debian mirror (default: http://deb.debian.org/debian)
#   -h, --help       this text
#
# Needs root, network access to the mirror, and buildah (`scripts/install-deps.sh --test` installs it). buildah
# runs with the `vfs` storage driver and `--isolation chroot`: both work as root where user namespaces, overlay
# mounts or cgroups do not (a container, or a CI runner where `podman run` fails on rlimits and cgroups). Use
# the same driver to push: `buildah --storage-driver vfs push NAME docker://REGISTRY/gpudoctor:VERSION`.
#
# Exit status: 0 when the image was built and every check passed, 1 when a check failed, 2 when this script
# could not run or the image could not be built.
set -euo pipefail

repo=$(cd "$(dirname "$0")/.." && pwd)
# shellcheck source=lib/debian-chroot.sh
source "$repo/scripts/lib/debian-chroot.sh"
deb=""
name=""
npd_binary=""
test_image=true
readonly port=9847
readonly scenario=/usr/share/doc/gpudoctor/examples/healthy-8xh100.toml
storage_driver=vfs

# buildah with this script's storage driver, whatever containers-storage.conf says.
buildah() { command buildah --storage-driver "$storage_driver" "$@"; }

usage() { sed -n '2,/^set -euo/{/^set -euo/d;s/^# \{0,1\}//;p}' "$0"; }
die() { echo "build-image: $*" >&2; exit 2; }

parse_options() {
  while (($#)); do
    case $1 in
      --deb) [[ -f ${2:-} ]] || die "--deb needs a .deb file"; deb=$(realpath "$2"); shift ;;
      --name) [[ -n ${2:-} ]] || die "--name needs a name"; name=$2; shift ;;
      --npd) [[ -x ${2:-} ]] || die "--npd needs node-problem-detector's program"; npd_binary=$(realpath "$2"); shift ;;
      --no-test) test_image=false ;;
      --storage-driver) [[ -n ${2:-} ]] || die "--storage-driver needs a name"; storage_driver=$2; shift ;;
      -h | --help) usage; exit 0 ;;
      *) take_chroot_option "$@"; shift $((chroot_option_used - 1)) ;;
    esac
    shift
  done
  if [[ -z $deb ]]; then
    local found=("$repo"/build-pkg/gpudoctor_*_amd64.deb)
    ((${#found[@]} == 1)) && [[ -f ${found[0]} ]] || die "no --deb, and not one package in build-pkg/"
    deb=${found[0]}
  fi
}

failures=0
summary=()
check() {
  local what=$1
  shift
  if "$@"; then summary+=("passed  $what"); else summary+=("FAILED  $what"); failures=$((failures + 1)); fi
}

# The package installed with apt in the fresh tree, with the CA certificates, and the list of what the image
# takes from it: the package's files but its man pages, completion, unit and docs (the examples stay), and every
# shared library a program or module of the package loads, as ldd resolves it there.
install_package() {
  cp "$deb" "$root/tmp/gpudoctor.deb"
  # NPD's program, when given, only for the libraries it loads: they join the image's (glibc's, as a rule).
  [[ -z $npd_binary ]] || cp "$npd_binary" "$root/tmp/node-problem-detector"
  # shellcheck disable=SC2016  # the chroot's shell expands these
  in_chroot root / '
    set -euo pipefail
    apt-get update -q && DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends \
      /tmp/gpudoctor.deb ca-certificates systemd
    dpkg -L gpudoctor | while read -r path; do
      [[ -f $path && ! -L $path ]] || continue
      case $path in
        /usr/share/man/* | /usr/share/bash-completion/* | /usr/share/zsh/* | /usr/share/lintian/* | /lib/systemd/* \
          | /usr/lib/systemd/*) ;;
        /usr/share/doc/gpudoctor/examples/*) echo "$path" ;;
        /usr/share/doc/*) ;;
        *) echo "$path" ;;
      esac
    done >/tmp/files
    echo /usr/bin/journalctl >>/tmp/files
    cp /tmp/files /tmp/programs
    [[ ! -f /tmp/node-problem-detector ]] || echo /tmp/node-problem-detector >>/tmp/programs
    # ldd names each library by the path the loader finds it at, and the loader itself; a static program, none.
    while read -r path; do
      if head -c 4 "$path" | grep -q ELF; then ldd "$path" || true; fi
    done </tmp/programs >/tmp/ldd
    ! grep "not found" /tmp/ldd
    grep -o "/[^ ]*" /tmp/ldd | sort -u >/tmp/libraries
  ' >"$work/install.log" 2>&1 || { tail -20 "$work/install.log" >&2; return 1; }
}

# The image's tree in $work/rootfs: Debian 12's merged /usr layout, the package's files, the libraries each at
# the path ldd found it (its real file copied), and the few files of /etc a program expects.
assemble_rootfs() {
  local image=$work/rootfs path
  rm -rf "$image" && mkdir -p "$image"/{usr/bin,usr/lib/x86_64-linux-gnu,usr/lib64,etc/ssl/certs,tmp,var/lib/gpudoctor}
  ln -s usr/bin "$image/bin" && ln -s usr/lib "$image/lib" && ln -s usr/lib64 "$image/lib64"
  chmod 1777 "$image/tmp" && chmod 0700 "$image/var/lib/gpudoctor"
  while read -r path; do
    mkdir -p "$image${path%/*}" && cp -a "$root$path" "$image$path"
  done <"$root/tmp/files"
  while read -r path; do
    path=${path#/lib64/} path=${path#/lib/} path=${path#/usr/lib64/} path=${path#/usr/lib/}
    [[ $path == ld-linux-x86-64.so.2 ]] && path=x86_64-linux-gnu/ld-linux-x86-64.so.2
    mkdir -p "$image/usr/lib/${path%/*}"
    cp -L "$root/usr/lib/$path" "$image/usr/lib/$path"
  done <"$root/tmp/libraries"
  ln -sf ../lib/x86_64-linux-gnu/ld-linux-x86-64.so.2 "$image/usr/lib64/ld-linux-x86-64.so.2"
  # The plugin path of node-problem-detector's config (deploy/kubernetes/npd-gpudoctor-plugin.json).
  mkdir -p "$image/usr/local/bin" && ln -s /usr/bin/gpudoctor "$image/usr/local/bin/gpudoctor"
  cp -L "$root/etc/ssl/certs/ca-certificates.crt" "$image/etc/ssl/certs/"
  printf 'root:x:0:0:root:/root:/usr/sbin/nologin\nnobody:x:65534:65534:nobody:/nonexistent:/usr/sbin/nologin\n' \
    >"$image/etc/passwd"
  printf 'root:x:0:\nnogroup:x:65534:\n' >"$image/etc/group"
  printf 'passwd: files\ngroup: files\nhosts: files dns\n' >"$image/etc/nsswitch.conf"
  printf '127.0.0.1\tlocalhost\n::1\tlocalhost\n' >"$image/etc/hosts"
  # The NVIDIA container toolkit adds the driver's libraries to /usr/lib/x86_64-linux-gnu and updates this cache.
  echo /usr/lib/x86_64-linux-gnu >"$image/etc/ld.so.conf"
  ldconfig -r "$image"
  du -sk "$image" | cut -f1 >"$work/rootfs-kib"
}

# commit_image NAME [NPD_PROGRAM]: the tree as the image NAME, configured as the manifests run it.
commit_image() {
  local image_name=$1 npd=${2:-} container
  container=$(buildah from scratch) || return 1
  buildah copy --quiet "$container" "$work/rootfs" / >/dev/null &&
    { [[ -z $npd ]] || buildah copy --quiet --chmod 0755 "$container" "$npd" /node-problem-detector >/dev/null; } &&
    buildah config --entrypoint '["/usr/bin/gpudoctor"]' --cmd '["agent", "--listen", "0.0.0.0:9847"]' \
      --port "$port/tcp" --user 0:0 --workingdir / \
      --env PATH=/usr/local/bin:/usr/bin --env NVIDIA_VISIBLE_DEVICES=all --env NVIDIA_DRIVER_CAPABILITIES=utility \
      --volume /var/lib/gpudoctor --stop-signal SIGTERM \
      --label org.opencontainers.image.title=gpudoctor \
      --label "org.opencontainers.image.version=$version" \
      "$container" &&
    { buildah rmi "$image_name" >/dev/null 2>&1 || true; } &&  # a rebuild replaces the image, leaves no copy
    buildah commit --quiet --format oci --rm "$container" "$image_name" >/dev/null ||
    { buildah rm "$container" >/dev/null 2>&1; return 1; }
}

# image_run COMMAND...: COMMAND in a container of the image, with chroot isolation; its output on stdout.
image_run() {
  local container status=0
  container=$(buildah from --quiet "$name") || return 1
  buildah run --isolation chroot "$container" -- "$@" || status=$?
  buildah rm "$container" >/dev/null
  return $status
}

check_runs_check() {
  local status=0
  image_run gpudoctor check --simulate "$scenario" >"$work/check.log" 2>&1 || status=$?
  tail -n 2 "$work/check.log" | sed 's/^/    /'
  echo "    exit $status"
  ((status == 0))
}

# The agent in the image on a free port of this machine (chroot isolation keeps the host's network) answers
# /healthz 200 once its first sample is in.
check_agent_healthz() {
  local listen_port agent answer=""
  listen_port=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
  image_run gpudoctor agent --simulate "$scenario" --interval 1s --listen "127.0.0.1:$listen_port" --log none \
    --duration 10s >"$work/agent.log" 2>&1 &
  agent=$!
  for _ in $(seq 1 18); do
    answer=$(curl -fsS --max-time 2 "http://127.0.0.1:$listen_port/healthz" 2>/dev/null) && break
    sleep 0.5
  done
  wait "$agent" || true
  echo "    /healthz: ${answer:-no answer}"
  [[ -n $answer ]]
}

check_manifests() {
  buildah inspect --type image "$name" >"$work/image-inspect.json" || return 1
  # The image's files as the manifests see them: this tree, which the image was made of.
  python3 "$repo/tests/kubernetes/check_image.py" --image-config "$work/image-inspect.json" --rootfs "$work/rootfs" \
    --version "$version" --source-dir "$repo" | sed 's/^/    /'
  return "${PIPESTATUS[0]}"
}

# An EXIT trap: the image's tree goes with the chroot (unless --keep); keeps the exit status.
cleanup_image() {
  local status=$?
  $keep || rm -rf "$work/rootfs"
  set +e
  (exit "$status")
  cleanup  # the chroot's, which reads the status from $?
}

main() {
  parse_options "$@"
  [[ $(id -u) -eq 0 ]] || die "needs root (debootstrap, chroot, buildah's storage): run it as root or with sudo"
  local tool
  for tool in buildah dpkg-deb ldconfig unshare chroot tar curl python3; do
    command -v "$tool" >/dev/null || die "needs $tool (scripts/install-deps.sh --test installs it)"
  done
  local start=$SECONDS
  version=$(dpkg-deb -f "$deb" Version)
  name=${name:-gpudoctor:$version}
  prepare_work_folder gpudoctor-image
  trap cleanup_image EXIT

  echo "== installing ${deb##*/} in a fresh Debian 12 tree (logs in $work)"
  make_fresh_tree
  install_package || die "installing the package failed (log: $work/install.log)"
  echo "== the image's tree: the package's files and the $(wc -l <"$root/tmp/libraries") libraries they load"
  assemble_rootfs || die "assembling the image's tree failed"
  echo "== buildah commit $name (storage driver $storage_driver)"
  commit_image "$name" || die "buildah could not make the image"
  local size
  size=$(buildah images --format '{{.Size}}' "$name" | head -1)
  echo "    $name: $size ($(($(cat "$work/rootfs-kib") / 1024)) MiB of files)"
  if [[ -n $npd_binary ]]; then
    echo "== buildah commit ${name%%:*}-npd:$version with ${npd_binary##*/}"
    commit_image "${name%%:*}-npd:$version" "$npd_binary" || die "buildah could not make the npd image"
  fi
  if $test_image; then
    echo "== gpudoctor check --simulate in the image"
    check "gpudoctor check --simulate in the image" check_runs_check
    echo "== the agent in the image answers /healthz"
    check "the agent in the image answers /healthz" check_agent_healthz
    echo "== the Kubernetes manifests against the image"
    check "the manifests name what the image has" check_manifests
  fi
  echo "== summary ($((SECONDS - start)) s; logs in $work)"
  printf '%s\n' "${summary[@]}"
  ((failures == 0))
}

main "$@"
