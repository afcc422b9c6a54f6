#!/usr/bin/env bash
# Proves gpudoctor against the real driver on a machine with NVIDIA GPUs:
# builds it, runs status and check, then diag memtest, burn and pcie, and
# writes docs/gpu-selftest.md with every figure beside the baseline measured
# in the same run (the device-to-device copy for the memtest, the same
# product alone for the burn, the link's theoretical rate for pcie).
#
#   scripts/gpu-selftest.sh                    # burn 2 minutes, memtest one pass
#   BURN=30s MEMTEST_SIZE=50% scripts/gpu-selftest.sh
#   scripts/gpu-selftest.sh --no-build         # use build/ as it is
#   SIMULATE=examples/healthy-8xh100.toml scripts/gpu-selftest.sh --no-build
#                                              # the fake driver: a dry run of this script, written to stdout
#
# Needs the NVIDIA driver, cmake, ninja and clang-16 (scripts/install-deps.sh).
# Exits 0 when every step ran, whatever the verdicts; the report says them.
set -euo pipefail
cd "$(dirname "$0")/.."
build=${BUILD_DIR:-build}
out=docs/gpu-selftest.md
raw=$(mktemp -d)
trap 'rm -rf "$raw"' EXIT

if [[ "${1:-}" != "--no-build" ]]; then
  cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release >/dev/null
  cmake --build "$build" -j"$(nproc)" >/dev/null
fi
gd=("$build/bin/gpudoctor")
smi=(nvidia-smi -q -x)
if [[ -n "${SIMULATE:-}" ]]; then
  gd+=(--simulate "$SIMULATE")
  smi=(true)
  out=/dev/stdout
fi

step() {  # step NAME COMMAND...: runs it, keeping stdout, exit status and wall time
  local name=$1
  shift
  local start end status=0
  start=$(date +%s.%N)
  "$@" >"$raw/$name.out" 2>"$raw/$name.err" || status=$?
  end=$(date +%s.%N)
  echo "$status" >"$raw/$name.status"
  python3 -c "print($end - $start)" >"$raw/$name.seconds"
  echo "== $name: exit $status in $(cat "$raw/$name.seconds") s" >&2
}

step smi "${smi[@]}"
step status "${gd[@]}" status --json
step check "${gd[@]}" check --json
step memtest "${gd[@]}" diag memtest --json --size "${MEMTEST_SIZE:-90%}" ${MEMTEST_ARGS:-}
step burn "${gd[@]}" diag burn --json --duration "${BURN:-2m}" ${BURN_ARGS:-}
step pcie "${gd[@]}" diag pcie --json ${PCIE_ARGS:-}
# GPM (profiling metrics) from the real driver: the agent for a few seconds with dcgm-exporter's names, one scrape.
gpm_scrape() {
  local port=${GPM_PORT:-19847} agent
  "${gd[@]}" agent --dcgm-names --interval 1s --listen "127.0.0.1:$port" --log none --db "$raw/agent.db" \
    2>"$raw/gpm_agent.err" &
  agent=$!
  sleep "${GPM_SECONDS:-5}"
  python3 -c "import sys, urllib.request as u; sys.stdout.write(u.urlopen(sys.argv[1], timeout=10).read().decode())" \
    "http://127.0.0.1:$port/metrics" || { kill "$agent"; wait "$agent"; return 1; }
  kill "$agent"
  wait "$agent" || true
}
step gpm gpm_scrape
# trace-alloc on a PyTorch program that leaks, plain and traced (and with expandable segments, which
# allocate through cuMemCreate / cuMemMap), when PyTorch with CUDA is importable; skipped otherwise.
torch_steps=${TORCH_STEPS:-300}
if [[ -z "${SIMULATE:-}" ]] && python3 -c "import torch, sys; sys.exit(0 if torch.cuda.is_available() else 1)" \
    >/dev/null 2>&1; then
  step torch_plain python3 tests/trace_alloc/torch_leak.py "$torch_steps"
  step torch_traced "$build/bin/gpudoctor" trace-alloc --json --interval 0 --report "$raw/torch_traced.json" \
    -- python3 tests/trace_alloc/torch_leak.py "$torch_steps"
  step torch_expandable env PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True "$build/bin/gpudoctor" trace-alloc \
    --json --interval 0 --report "$raw/torch_expandable.json" -- python3 tests/trace_alloc/torch_leak.py "$torch_steps"
else
  echo "== torch: skipped (PyTorch with CUDA is not importable here)" >&2
fi

python3 - "$raw" "$out" <<'EOF'
import json, pathlib, platform, subprocess, sys
raw, out = pathlib.Path(sys.argv[1]), pathlib.Path(sys.argv[2])

def read(name):
    return [json.loads(l) for l in (raw / f"{name}.out").read_text().splitlines() if l.startswith("{")]

def meta(name):
    return (raw / f"{name}.status").read_text().strip(), float((raw / f"{name}.seconds").read_text())

def results(name):
    return [l for l in read(name) if l.get("event") == "result"]

lines = ["# GPU self-test", ""]
try:
    driver = subprocess.run(["nvidia-smi", "--query-gpu=driver_version,name", "--format=csv,noheader"],
                            capture_output=True, text=True).stdout.strip().splitlines()
except FileNotFoundError:
    driver = []
lines += [f"Run by `scripts/gpu-selftest.sh` on {platform.node()}: {len(driver)} GPU(s), "
          f"{driver[0] if driver else 'unknown driver'} (driver, name). Each figure is set against a baseline "
          "measured in the same run.", ""]
lines += ["| step | exit | seconds |", "|---|---|---|"]
for name in ["smi", "status", "check", "memtest", "burn", "pcie"]:
    status, seconds = meta(name)
    lines.append(f"| {name} | {status} | {seconds:.2f} |")
smi_s, status_s = meta("smi")[1], meta("status")[1]
lines += ["", f"`status` answered in {status_s / smi_s:.2f}x the time of `nvidia-smi -q -x` in this run.", ""]

lines += ["## memtest", "", "| GPU | state | tested | copy GB/s | slowest pattern | GB/s | share of copy |",
          "|---|---|---|---|---|---|---|"]
for r in results("memtest"):
    patterns = r.get("patterns", [])
    slow = min(patterns, key=lambda p: p["gb_per_s"]) if patterns else {"name": "-", "gb_per_s": 0, "share_of_copy": 0}
    lines.append(f"| {r['gpu']} | {r['state']} | {r.get('bytes_tested', 0) / 2**30:.1f} GiB | "
                 f"{r.get('copy_gb_per_s', 0):.0f} | {slow['name']} | {slow['gb_per_s']:.0f} | {slow['share_of_copy']:.1%} |")
lines += ["", "Every pattern, GB/s and share of the same-run copy:", ""]
for r in results("memtest"):
    lines.append(f"- GPU {r['gpu']}: " + ", ".join(f"{p['name']} {p['gb_per_s']:.0f} ({p['share_of_copy']:.0%})"
                                                    for p in r.get("patterns", [])))

lines += ["", "## burn", "", "| GPU | state | precision | engine | matrix | TFLOP/s verified | alone | share |",
          "|---|---|---|---|---|---|---|---|"]
for r in results("burn"):
    for p in r.get("precisions", []):
        lines.append(f"| {r['gpu']} | {r['state']} | {p['precision']} | {p['engine']} | {p['matrix']} | "
                     f"{p['tflops']:.1f} | {p['baseline_tflops']:.1f} | {p['share_of_baseline']:.1%} |")

lines += ["", "## pcie", "", "| GPU | state | host->device GB/s | device->host GB/s | summary |", "|---|---|---|---|---|"]
for r in results("pcie"):
    lines.append(f"| {r['gpu']} | {r['state']} | {r.get('host_to_device_gb_per_s', 0):.1f} | "
                 f"{r.get('device_to_host_gb_per_s', 0):.1f} | {r['summary']} |")
peers = [(r["gpu"], p) for r in results("pcie") for p in r.get("peers", [])]
if peers:
    lines += ["", "Peer copies (GB/s): " + ", ".join(f"{a}->{p['to']} {p['gb_per_s']:.0f}" for a, p in peers)]

lines += ["", "## GPM (profiling metrics)", ""]
profiling = {}
for line in (raw / "gpm.out").read_text().splitlines():
    if line.startswith("DCGM_FI_PROF_") and "{" in line:
        name, rest = line.split("{", 1)
        gpu = rest.split('gpu="', 1)[1].split('"', 1)[0] if 'gpu="' in rest else "?"
        profiling.setdefault(gpu, []).append(f"{name.removeprefix('DCGM_FI_PROF_')} {line.rsplit(' ', 1)[1]}")
try:
    status_gpus = json.loads((raw / "status.out").read_text()).get("gpus", [])
except ValueError:
    status_gpus = []
for gpu in status_gpus:
    index = str(gpu.get("index"))
    if index in profiling:
        lines.append(f"- GPU {index}: " + ", ".join(profiling[index]))
    else:
        notes = [n for n in gpu.get("notes", []) if "Performance Monitoring" in n]
        lines.append(f"- GPU {index}: no profiling series (gpm_supported {gpu.get('gpm_supported')}; "
                     f"{notes[0] if notes else 'no note'})")
lines.append(f"\nThe agent's scrape after {meta('gpm')[1]:.0f} s, exit {meta('gpm')[0]}.")

lines += ["", "## trace-alloc on PyTorch", ""]
if (raw / "torch_plain.status").exists():
    def step_ms(name):
        text = (raw / f"{name}.out").read_text()
        return float(text.split("median_step_ms=")[1].split()[0]) if "median_step_ms=" in text else float("nan")
    plain_ms = step_ms("torch_plain")
    lines += ["`tests/trace_alloc/torch_leak.py` keeps 4 MiB of output every step. Median step time, and what "
              "`gpudoctor trace-alloc` found:", "",
              "| run | exit | median step ms | vs plain | verdict | never freed | top site |", "|---|---|---|---|---|---|---|",
              f"| plain | {meta('torch_plain')[0]} | {plain_ms:.3f} | | | | |"]
    for name in ["torch_traced", "torch_expandable"]:
        report_path = raw / f"{name}.json"
        report = json.loads(report_path.read_text()) if report_path.exists() else {}
        never = report.get("never_freed", [])
        top = "-"
        if never:
            frames = [f["function"] for f in never[0]["frames"] if f.get("function")][:2]
            top = f"{never[0]['api']}: " + " <- ".join(frames)
        ms = step_ms(name)
        lines.append(f"| {name.replace('torch_', '')} | {meta(name)[0]} | {ms:.3f} | {ms / plain_ms - 1:+.1%} | "
                     f"{report.get('verdict', {}).get('state', '-')} | "
                     f"{report.get('totals', {}).get('outstanding_bytes', 0) / 2**20:.0f} MiB | {top} |")
else:
    lines.append("Skipped: PyTorch with CUDA is not importable on this machine.")

problems = [f"- {name} GPU {r['gpu']}: {p}" for name in ["memtest", "burn", "pcie"] for r in results(name)
            for p in r.get("problems", [])]
lines += ["", "## Problems found", ""] + (problems or ["None."])
out.write_text("\n".join(lines) + "\n")
if str(out) != "/dev/stdout":
    print(f"wrote {out}")
EOF
