#!/usr/bin/env bash
# Where the agent's resident memory is: one agent started as bench/agent_gpm.sh starts its GPM-on agent
# (examples/hopper-gpm.toml, 8 simulated H100s, --dcgm-names, --interval 1s, --log none), one /metrics
# scrape, then /proc/PID/smaps summed per mapped object after SECONDS (KiB, largest first). The NVML probe
# is another process and is not counted.
#
#   bench/agent_smaps.sh [BUILD_DIR] [SECONDS]     (defaults: build, 20)
set -euo pipefail

build=${1:-build}
seconds=${2:-20}
root=$(cd "$(dirname "$0")/.." && pwd)
work=$(mktemp -d)
pid=
trap '[[ -n $pid ]] && kill "$pid" 2>/dev/null; wait 2>/dev/null || true; rm -rf "$work"' EXIT

"$build/bin/gpudoctor" --simulate "$root/examples/hopper-gpm.toml" agent --interval 1s --listen 127.0.0.1:0 \
  --dcgm-names --db "$work/agent.db" --log none 2>"$work/agent.log" &
pid=$!
sleep "$seconds"
port=$(sed -nE 's|.*listening on http://127\.0\.0\.1:([0-9]+)/.*|\1|p' "$work/agent.log" | head -1)
curl -s "http://127.0.0.1:$port/metrics" >/dev/null
sleep 1
grep -E '^(VmRSS|RssAnon|RssFile|Threads):' "/proc/$pid/status" | tr -s ' \t' ' ' | paste -sd ';'
python3 - "$pid" <<'PY'
import collections, re, sys
keys = ["Rss", "Pss", "Anonymous", "Shared_Clean", "Private_Clean", "Private_Dirty"]
totals, current = collections.defaultdict(collections.Counter), None
for line in open(f"/proc/{sys.argv[1]}/smaps"):
    head = re.match(r"^[0-9a-f]+-[0-9a-f]+ \S+ \S+ \S+ \S+\s*(.*)$", line)
    if head:
        name = head.group(1).strip() or "[anonymous]"
        current = totals[name.rsplit("/", 1)[-1] if name.startswith("/") else name]
    elif line.split(":")[0] in keys:
        current[line.split(":")[0]] += int(line.split()[1])
print(f"| {'mapping':34s} | " + " | ".join(keys) + " |")
print("|---" * (len(keys) + 1) + "|")
rows = sorted((item for item in totals.items() if item[1]["Rss"]), key=lambda item: -item[1]["Rss"])
rows.append(("total", sum((counts for _, counts in rows), collections.Counter())))
for name, counts in rows:
    print(f"| {name[:34]:34s} | " + " | ".join(str(counts[k]) for k in keys) + " |")
PY
