# Sourced by scripts/fresh-check.sh and scripts/package-check.sh: a fresh minbase Debian 12 (bookworm) tree made
# with debootstrap and cached as a tarball, and commands run in it as a chosen user inside a private mount and
# PID namespace (unshare), so no mount outlives a command, even if the script is killed, and every process a
# command starts ends with it.
#
# The caller sets repo (the repository's folder) and defines die MESSAGE; parse_chroot_option reads the options
# below into work (the work folder), base (the tarball), fresh_base (true: debootstrap again), mirror (a Debian
# mirror URL) and keep (true: keep the tree); prepare_work_folder makes work and root (the tree, inside work).
# Needs root.

keep=false
work=""
base=/var/tmp/gpudoctor-fresh-bookworm.tar
fresh_base=false
mirror=http://deb.debian.org/debian

# parse_chroot_option ARGS...: reads the option at $1 when it is one of these, setting chroot_option_used to the
# number of arguments it took (0: not one of them):
#   --keep           keep the chroot afterwards (default: delete it; the logs are kept either way)
#   --dir DIR        work folder, absent or empty, outside the repository (default: a new one in /var/tmp)
#   --base FILE      tarball of the fresh debootstrap tree, made on the first run and unpacked on later ones
#   --fresh-base     run debootstrap again and replace that tarball
#   --mirror URL     Debian mirror
parse_chroot_option() {
  chroot_option_used=1
  case $1 in
    --keep) keep=true ;;
    --dir) [[ -n ${2:-} ]] || die "--dir needs a folder"; work=$2; chroot_option_used=2 ;;
    --base) [[ -n ${2:-} ]] || die "--base needs a file"; base=$2; chroot_option_used=2 ;;
    --fresh-base) fresh_base=true ;;
    --mirror) [[ -n ${2:-} ]] || die "--mirror needs a URL"; mirror=$2; chroot_option_used=2 ;;
    *) chroot_option_used=0 ;;
  esac
}

# take_chroot_option ARGS...: parse_chroot_option, and die naming $1 when it is none of them.
take_chroot_option() {
  parse_chroot_option "$@"
  ((chroot_option_used)) || die "unknown option $1 (see --help)"
}

# prepare_work_folder NAME: work (--dir's folder, or a new /var/tmp/NAME.XXXXXX) and root, the empty tree in it.
prepare_work_folder() {
  if [[ -z $work ]]; then
    work=$(mktemp -d "/var/tmp/$1.XXXXXX")
  else
    work=$(realpath -m "$work")
    [[ $work/ != "$repo"/* ]] || die "the work folder must be outside the repository"
    mkdir -p "$work"
    [[ -z $(ls -A "$work") ]] || die "$work is not empty"
  fi
  root=$work/root
  mkdir "$root"
}

# The Debian installer's sources: release, updates and security.
write_apt_sources() {
  local security=http://deb.debian.org/debian-security
  [[ $mirror == */debian ]] && security=${mirror%/debian}/debian-security
  printf 'deb %s bookworm main\ndeb %s bookworm-updates main\ndeb %s bookworm-security main\n' \
    "$mirror" "$mirror" "$security" >"$root/etc/apt/sources.list"
}

make_base() {
  if ! command -v debootstrap >/dev/null; then
    echo "== installing debootstrap"
    apt-get update -q && apt-get install -y -q debootstrap
  fi
  echo "== debootstrap --variant=minbase bookworm $mirror"
  # In its own mount namespace: the /proc and /sys it mounts in the tree cannot outlive it.
  unshare --mount --propagation private -- debootstrap --variant=minbase bookworm "$root" "$mirror" \
    >"$work/debootstrap.log" 2>&1 ||
    { tail -20 "$work/debootstrap.log" >&2; die "debootstrap failed (log: $work/debootstrap.log)"; }
  write_apt_sources
  mkdir -p "$(dirname "$base")"
  tar --numeric-owner --xattrs -C "$root" -cf "$base.partial" . && mv "$base.partial" "$base"
  echo "== cached the fresh tree in $base"
}

unpack_base() {
  echo "== unpacking $base (--fresh-base to debootstrap again)"
  tar --numeric-owner --xattrs -xpf "$base" -C "$root"
}

# This machine's name server, and its host name in /etc/hosts as the Debian installer writes it
# (sudo warns about a host name it cannot resolve).
write_network_files() {
  cp -L /etc/resolv.conf "$root/etc/resolv.conf"
  printf '127.0.0.1\tlocalhost\n127.0.1.1\t%s\n' "$(hostname)" >"$root/etc/hosts"
}

# A fresh tree in $root: debootstrapped (and cached) or unpacked from the cache, with working name resolution.
make_fresh_tree() {
  if $fresh_base || [[ ! -f $base ]]; then make_base; else unpack_base; fi
  write_network_files
}

# in_chroot USER DIR COMMAND: runs COMMAND with bash in DIR inside the chroot, as USER, with a clean
# login-like environment, in its own mount and PID namespace.
in_chroot() {
  local user=$1 directory=$2 command=$3 home=/root
  [[ $user == root ]] || home=/home/$user
  # shellcheck disable=SC2016  # the inner shell expands its arguments
  unshare --mount --pid --fork --kill-child --propagation private -- /bin/bash -c '
    set -e
    root=$1 user=$2 home=$3 directory=$4 command=$5
    # The tree made a mount point of its own, as / is on a machine: a command inside may then make a private
    # mount namespace of its own (the package check does, for the chroot it makes in turn).
    mount --bind "$root" "$root"
    mount -t proc proc "$root/proc"
    mount -t sysfs sysfs "$root/sys"
    # The cgroup file systems as this machine has them (slurmd, for one, will not start without them): a
    # Debian 12 host has cgroup2 alone there, some hosts still the v1 hierarchies, beside which slurmd
    # refuses a cgroup2 ("Hybrid mode is not supported"). Where none is mounted, what systemd would mount.
    if mountpoint -q /sys/fs/cgroup; then
      mount --rbind /sys/fs/cgroup "$root/sys/fs/cgroup"
    else
      mount -t cgroup2 cgroup2 "$root/sys/fs/cgroup" 2>/dev/null || true
    fi
    mount --bind /dev "$root/dev"
    mount -t devpts -o newinstance,ptmxmode=0666,mode=0620 devpts "$root/dev/pts"
    mount -t tmpfs -o mode=1777 tmpfs "$root/dev/shm"
    set +e
    chroot "$root" setpriv --reuid="$user" --regid="$user" --init-groups \
      env -i HOME="$home" USER="$user" LOGNAME="$user" TERM="${TERM:-dumb}" \
      PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
      /bin/bash -c "cd \"\$0\" || exit
$command" "$directory"
  ' debian-chroot "$root" "$user" "$home" "$directory" "$command"
}

# An EXIT trap: deletes the tree unless keep; keeps the exit status.
cleanup() {
  local status=$?
  if $keep; then
    echo "== kept the chroot: $root"
  elif grep -q " $root/" /proc/self/mountinfo; then
    # Mounts live only in the commands' namespaces; one visible here is not ours to delete under.
    echo "${0##*/}: something is mounted under $root; not deleting it" >&2
  else
    rm -rf --one-file-system "$root"
  fi
  return "$status"
}
