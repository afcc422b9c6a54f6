#!/usr/bin/env bash
# Proves the README's Quick start on a fresh Debian 12: makes a minbase bookworm
# chroot with debootstrap, copies the project into it and runs each Quick start
# command exactly as README.md writes it (read from the README, so the two never
# drift), reporting each one's exit status and wall time.
#
#   scripts/fresh-check.sh [OPTIONS]
#
#   --only check|test  run only the first command (install, build, check) or only the second (the tests)
#   --worktree         copy the working tree with its uncommitted changes (default: the commit HEAD)
#   --sudo-user        run the commands as an ordinary user with sudo rights instead of root
#   --keep             keep the chroot afterwards (default: delete it; the logs are kept either way)
#   --dir DIR          work folder, absent or empty, outside the repository (default: a new one in /var/tmp)
#   --base FILE        tarball of the fresh debootstrap tree, made on the first run and unpacked on later
#                      ones (default: /var/tmp/gpudoctor-fresh-bookworm.tar)
#   --fresh-base       run debootstrap again and replace that tarball
#   --mirror URL       Debian mirror (default: http://deb.debian.org/debian)
#   -h, --help         this text
#
# The first command succeeds when everything before `gpudoctor check` succeeds and check gives a
# verdict (0 ok, 1 warning, 2 critical, 3 unknown). A chroot has no NVIDIA driver, so check reports
# `driver_unavailable` and exits 2 (critical) there. The second command must exit 0.
#
# Exit status: 0 when every command run succeeded, 1 when one failed, 2 when this script could not
# run (usage, not root, debootstrap failed).
#
# Needs root: debootstrap, chroot and mounts. The chroot's /proc, /sys (and its cgroup2) and /dev are mounted in a
# private mount and PID namespace (unshare), so no mount outlives a command, even if this script is
# killed, and every process a command starts ends with it.
set -euo pipefail

repo=$(cd "$(dirname "$0")/.." && pwd)
# shellcheck source=lib/debian-chroot.sh
source "$repo/scripts/lib/debian-chroot.sh"
only=""
copy_worktree=false
sudo_user=false
readonly builder=builder  # the ordinary user of --sudo-user

usage() { sed -n '2,/^set -euo/{/^set -euo/d;s/^# \{0,1\}//;p}' "$0"; }
die() { echo "fresh-check: $*" >&2; exit 2; }

parse_options() {
  while (($#)); do
    case $1 in
      --only) [[ ${2:-} == check || ${2:-} == test ]] || die "--only takes check or test"; only=$2; shift ;;
      --worktree) copy_worktree=true ;;
      --sudo-user) sudo_user=true ;;
      -h | --help) usage; exit 0 ;;
      *) take_chroot_option "$@"; shift $((chroot_option_used - 1)) ;;
    esac
    shift
  done
}

# The commands of the README's Quick start: the lines of its first sh block that are not comments.
quick_start_commands() {
  awk '/^## /{in_section = ($0 == "## Quick start")} in_section && /^```sh/{block = 1; next}
       block && /^```/{exit} block && NF && !/^[[:space:]]*#/' "$repo/README.md"
}

# The committed tree, or with --worktree every file git tracks or would track, as it is on disk.
copy_project() {
  local destination=$1
  mkdir -p "$destination"
  if $copy_worktree; then
    git -C "$repo" -c safe.directory="$repo" ls-files -z --cached --others --exclude-standard |
      while IFS= read -r -d '' file; do [[ -e $repo/$file ]] && printf '%s\0' "$file"; done |
      tar -C "$repo" --null -T - -cf - | tar -C "$destination" -xf -
  else
    git -C "$repo" -c safe.directory="$repo" archive HEAD | tar -C "$destination" -xf -
  fi
}

add_sudo_user() {
  echo "== adding the user $builder with passwordless sudo"
  in_chroot root / "apt-get update -q && DEBIAN_FRONTEND=noninteractive apt-get install -y -q sudo &&
    useradd --create-home --shell /bin/bash $builder &&
    echo '$builder ALL=(ALL) NOPASSWD:ALL' >/etc/sudoers.d/$builder && chmod 0440 /etc/sudoers.d/$builder" \
    >"$work/sudo-user.log" 2>&1 || { tail -20 "$work/sudo-user.log" >&2; die "could not add $builder"; }
}

# Runs one Quick start command; sets command_status, failed_step and command_seconds.
# A DEBUG trap records each step the command's shell starts, so a failure names its step.
run_quick_start_command() {
  local user=$1 directory=$2 command=$3 log=$4
  local steps=/tmp/fresh-check-steps
  local traced="trap 'printf \"%s\\n\" \"\$BASH_COMMAND\" >>$steps' DEBUG"$'\n'"$command"
  rm -f "$root$steps"
  local start=$SECONDS
  command_status=0
  in_chroot "$user" "$directory" "$traced" 2>&1 | tee "$log" || command_status=${PIPESTATUS[0]}
  command_seconds=$((SECONDS - start))
  failed_step=$(tail -n 1 "$root$steps" 2>/dev/null || true)
}

# A command passes when it exits 0, or when its last step is `gpudoctor check` giving a verdict.
command_passed() {
  ((command_status == 0)) && return 0
  [[ $failed_step == */gpudoctor\ check* ]] && ((command_status >= 1 && command_status <= 3))
}

check_verdict() {
  case $1 in 0) echo ok ;; 1) echo warning ;; 2) echo critical ;; 3) echo unknown ;; esac
}

main() {
  parse_options "$@"
  [[ $(id -u) -eq 0 ]] || die "needs root (debootstrap, chroot and mounts): run it as root or with sudo"
  for tool in git unshare chroot tar; do command -v "$tool" >/dev/null || die "needs $tool"; done

  mapfile -t commands < <(quick_start_commands)
  ((${#commands[@]} == 2)) ||
    die "README.md's Quick start should hold exactly two commands; found ${#commands[@]}"
  local names=(check test)

  prepare_work_folder gpudoctor-fresh
  trap cleanup EXIT
  make_fresh_tree

  local user=root directory=/root/gpudoctor
  if $sudo_user; then
    add_sudo_user
    user=$builder directory=/home/$builder/gpudoctor
  fi
  copy_project "$root$directory"
  chroot "$root" chown -R "$user:" "$directory"

  local summary=() failures=0
  for i in 0 1; do
    [[ -z $only || $only == "${names[i]}" ]] || continue
    echo "== Quick start command $((i + 1)) (${names[i]}), as $user in $directory:"
    echo "   ${commands[i]}"
    run_quick_start_command "$user" "$directory" "${commands[i]}" "$work/${names[i]}.log"
    local outcome=passed detail=""
    command_passed || { outcome=FAILED; failures=$((failures + 1)); }
    if ((command_status != 0)); then
      detail=" at step: $failed_step"
      [[ $outcome == passed ]] && detail+=" (verdict: $(check_verdict "$command_status"))"
    fi
    summary+=("$(printf '%-5s exit %-3s %4dm%02ds  %s%s' "${names[i]}" "$command_status" \
      $((command_seconds / 60)) $((command_seconds % 60)) "$outcome" "$detail")")
  done

  echo "== summary (logs in $work)"
  printf '%s\n' "${summary[@]}"
  ((failures == 0))
}

main "$@"
