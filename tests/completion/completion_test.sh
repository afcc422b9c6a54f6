#!/usr/bin/env bash
# The shell completion the build generates (cmake/program_docs.cmake): bash offers the commands, each command's
# subcommands and options with the global ones, and file names for an option's value; zsh's script parses.
#   completion_test.sh BUILD/completion
set -euo pipefail
dir=$1
failures=0

# shellcheck source=/dev/null
source "$dir/gpudoctor"

# offers WORD... : what bash completes for the command line WORD..., the last being the word at the cursor.
offers() {
  COMP_WORDS=("$@")
  COMP_CWORD=$((${#COMP_WORDS[@]} - 1))
  COMPREPLY=()
  _gpudoctor
  printf '%s\n' "${COMPREPLY[@]}"
}
expect() {
  local want=$1 offered
  shift
  # Read whole before grep looks: with pipefail, grep -q leaving at the first match made the printf in offers
  # die of SIGPIPE now and then, and a completion that was offered was reported missing.
  offered=$(offers "$@")
  if ! grep -qx -- "$want" <<<"$offered"; then
    echo "FAIL: '$*' should offer '$want'; it offers: $(tr '\n' ' ' <<<"$offered")"
    failures=$((failures + 1))
  fi
}
expect_nothing() {
  if [[ -n $(offers "$@") ]]; then
    echo "FAIL: '$*' should offer nothing (file names); it offers: $(offers "$@" | tr '\n' ' ')"
    failures=$((failures + 1))
  fi
}

expect check gpudoctor ch
expect status gpudoctor ""
expect trace-alloc gpudoctor tr
expect --version gpudoctor --v
expect --json gpudoctor check --j
expect memtest gpudoctor diag ""
expect --level gpudoctor diag --le
expect --simulate gpudoctor diag memtest --sim   # the global options after a subcommand
expect status gpudoctor --config site.toml st     # an option's value is not a command
expect attribution gpudoctor --json fleet at
expect_nothing gpudoctor --config ""               # the value of --config: file names
expect_nothing gpudoctor check --from ""
expect_nothing gpudoctor trace-alloc -- py         # the traced program's own command line

if command -v zsh >/dev/null; then
  zsh -n "$dir/_gpudoctor" || { echo "FAIL: zsh cannot parse _gpudoctor"; failures=$((failures + 1)); }
fi
if ! grep -q '^#compdef gpudoctor$' "$dir/_gpudoctor"; then
  echo "FAIL: _gpudoctor lacks #compdef"
  failures=$((failures + 1))
fi
((failures == 0)) && echo "completion: all cases pass"
((failures == 0))
