#!/usr/bin/env bash
# Assembles each diag kernel PTX the build embeds for every GPU target the build claims, with NVIDIA's ptxas, and
# fails where ptxas refuses it or where a kernel spills registers to memory (a silent slowdown of the burn).
#
#   assemble_kernels.sh --targets "sm_70 sm_80 ..." FILE.ptx...
#
# ptxas is looked for on PATH, then where Debian's nvidia-cuda-toolkit (non-free) puts it, then in
# /usr/local/cuda/bin. A target this ptxas no longer knows (CUDA 13 dropped sm_70) is named and left out.
#
# Exit status: 0 every file assembled for every target ptxas knows, with no spill; 1 a file failed or spilled;
# 2 bad arguments; 77 skipped: no ptxas, or it knows none of the targets.
set -euo pipefail

usage() { sed -n '2,/^set -euo/{/^set -euo/d;s/^# \{0,1\}//;p}' "$0"; }
targets=""
while (($#)); do
  case $1 in
    --targets) targets=${2:-}; shift 2 ;;
    -h | --help) usage; exit 0 ;;
    *) break ;;
  esac
done
[[ -n $targets && $# -gt 0 ]] || { usage >&2; exit 2; }

ptxas=$(command -v ptxas || true)
for candidate in /usr/lib/nvidia-cuda-toolkit/bin/ptxas /usr/local/cuda/bin/ptxas; do
  [[ -n $ptxas ]] || { [[ -x $candidate ]] && ptxas=$candidate; } || true
done
if [[ -z $ptxas ]]; then
  echo "SKIPPED: no ptxas (PATH, Debian's nvidia-cuda-toolkit, /usr/local/cuda/bin)"
  exit 77
fi
echo "ptxas: $ptxas ($("$ptxas" --version | tail -n 1))"

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
failures=0 assembled=0
for target in $targets; do
  for ptx in "$@"; do
    name=$(basename "$ptx" .ptx)
    if "$ptxas" -arch="$target" -v "$ptx" -o "$work/$name.cubin" >"$work/log" 2>&1; then
      if grep -Eq '[1-9][0-9]* bytes spill (stores|loads)' "$work/log"; then
        echo "FAILED $name for $target: registers spill"
        grep -B2 -E '[1-9][0-9]* bytes spill' "$work/log" | sed 's/^/    /'
        failures=$((failures + 1))
      else
        echo "ok     $name for $target: $(grep -c 'Compiling entry function' "$work/log") kernels, no spill"
      fi
      assembled=$((assembled + 1))
    elif grep -q "is not defined for option 'gpu-name'" "$work/log"; then
      echo "note   $target: this ptxas does not know it; not checked"
      break
    else
      echo "FAILED $name for $target:"
      sed 's/^/    /' "$work/log"
      failures=$((failures + 1))
    fi
  done
done
if ((failures == 0 && assembled == 0)); then
  echo "SKIPPED: this ptxas knows none of $targets"
  exit 77
fi
((failures == 0))
