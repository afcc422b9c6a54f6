#!/usr/bin/env python3
"""The fleet simulation's quick run, as a test: bench/fleet_sim.py --quick.

Ten simulated hosts (agents on the fake NVML) scraped by the real Prometheus with the shipped rules,
one GPU fault of each kind from the published failure mix, and two staged card swaps (a bad card, a
bad slot). Passes only when every injected GPU fault shows on its host in `gpudoctor fleet`, no
fault-free host is flagged (a GPU finding, or not answering outside a staged restart for longer than one
missed scrape), and `gpudoctor
fleet attribution` blames the card for the bad card and the slot for the bad slot.

    fleet_sim_test.py --gpudoctor build/bin/gpudoctor [--source-dir .]

Exit status: 0 passed, 1 failed, 77 skipped (no prometheus binary: `apt-get install prometheus`).
Python's standard library only. About 2.5 minutes.
"""

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile

SKIP = 77


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--gpudoctor", default=os.environ.get("GPUDOCTOR_BIN", "build/bin/gpudoctor"))
    parser.add_argument("--source-dir", default=os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
    args = parser.parse_args()
    if not shutil.which("prometheus"):
        print("SKIPPED: needs the prometheus binary (apt-get install prometheus)")
        return SKIP

    simulation = os.path.join(os.path.abspath(args.source_dir), "bench", "fleet_sim.py")
    with tempfile.TemporaryDirectory(prefix="fleet-sim-test-") as workdir:
        out = os.path.join(workdir, "result.json")
        done = subprocess.run([sys.executable, simulation, "--quick", "--gpudoctor", args.gpudoctor,
                               "--source-dir", args.source_dir, "--json-out", out], timeout=280)
        if done.returncode == SKIP:
            return SKIP
        if not os.path.exists(out):
            print(f"FAILED: the simulation did not complete (exit status {done.returncode})")
            return 1
        with open(out) as f:
            result = json.load(f)

    failures = []
    for fault in result["faults"]:
        if not fault["detected"]:
            failures.append(f"{fault['kind']} on {fault['hostname']} gpu {fault['gpu']} ({fault['origin']}) "
                            "never showed in `gpudoctor fleet`")
    expected_kinds = {"xid79_fell_off_bus", "hbm3_uncorrectable_ecc", "hbm3_row_remap_failure", "sram_uncontained_ecc",
                      "gsp_rpc_timeout", "thermal_interface", "pcie_slot_replays"}
    missing = expected_kinds - set(result["by_kind"])
    if missing:
        failures.append(f"fault kinds not injected: {sorted(missing)}")
    fp = result["false_positives"]
    if fp["fault_free_hosts"] == 0:
        failures.append("no fault-free host to check for false positives")
    for host, findings in fp["gpu"].items():
        failures.append(f"false positive: fault-free host {host} showed {', '.join(findings)}")
    for host in fp["fault_free_hosts_not_answering"]:
        failures.append(f"false positive: fault-free host {host} was shown as not answering")
    blames = sorted(swap["blame"] for swap in result["swaps"])
    if blames != ["card", "slot"]:
        failures.append(f"staged swaps: expected a bad card and a bad slot, got {blames}")
    for swap in result["swaps"]:
        if not swap["right"]:
            verdicts = [(v["blame"], v["serial"], v["slot"]["hostname"], v["slot"]["pci_bus_id"], v["summary"])
                        for v in swap["verdicts"]]
            failures.append(f"attribution wrong on the bad {swap['blame']} (suspect {swap['suspect']}, partner "
                            f"{swap['partner']}): verdicts {verdicts}")
    if failures:
        print("FAILED:\n  " + "\n  ".join(failures))
        return 1
    print(f"PASSED: {len(result['faults'])} faults detected, no false positive on {fp['fault_free_hosts']} "
          f"fault-free hosts, attribution right on {len(result['swaps'])} staged swaps")
    return 0


if __name__ == "__main__":
    sys.exit(main())
