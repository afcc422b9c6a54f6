#!/usr/bin/env python3
"""GPM and dcgm-exporter's names, end to end, against the simulated GPUs' own values.

Two agents with --dcgm-names: one on examples/hopper-gpm.toml (8 H100s with GPU Performance
Monitoring, each at its own load), one on examples/healthy-8xh100.toml (GPM off).

    dcgm_dashboard_test.py --gpudoctor build/bin/gpudoctor [--source-dir .] --part values|dashboard

--part values (no other program needed) scrapes /metrics and checks every GPM reading, energy,
encoder, decoder and reserved memory reading, in gpudoctor's names and in dcgm-exporter's, against
the scenario's value in the unit each name promises; a reading the scenario marks not supported,
and every GPM reading of the GPUs without GPM, must be absent, never 0; `status --json` must say
once per GPU that GPM is missing.

--part dashboard starts Prometheus scraping both agents and evaluates every query of NVIDIA's
dashboard (testdata/dcgm_exporter: the published one and the one with a Hostname variable, unchanged:
each panel and each template variable) with its variables set to "all": every panel must show a
series for each of the Hopper host's 8 GPUs, and the profiling panels must show the scenario's values.

Exit status: 0 passed, 1 failed, 77 skipped (--part dashboard without a prometheus binary).
Python's standard library only.
"""

import argparse
import json
import math
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
import tomllib

from servers import Daemons, TestFailure, free_ports, http_get, prometheus_query, wait_until

SKIP = 77
GPM_SCENARIO = "hopper-gpm.toml"
# NVIDIA's dashboard as published, and as proposed with a Hostname variable (testdata/dcgm_exporter/README.md).
DASHBOARDS = ["dcgm-exporter-dashboard.json", "dcgm-exporter-dashboard-hostname.json"]
PLAIN_SCENARIO = "healthy-8xh100.toml"
MIB = 1024 * 1024

# The fake NVML's built-in values (docs/scenarios.md) for the keys below that a scenario may leave out.
FAKE_DEFAULTS = {
    "power_draw_w": 72, "memory_reserved_mib": 561, "encoder_utilization_percent": 0,
    "decoder_utilization_percent": 0, "gpm_supported": False,
}

# Each reading: the scenario key (in NVML's unit), then each name it is exported under with the
# factor from the scenario's unit to that name's.
READINGS = [
    ("gpm_graphics_util_percent", [("gpudoctor_gpu_graphics_engine_active_ratio", 0.01),
                                   ("DCGM_FI_PROF_GR_ENGINE_ACTIVE", 0.01)]),
    ("gpm_sm_util_percent", [("gpudoctor_gpu_sm_active_ratio", 0.01), ("DCGM_FI_PROF_SM_ACTIVE", 0.01)]),
    ("gpm_sm_occupancy_percent", [("gpudoctor_gpu_sm_occupancy_ratio", 0.01),
                                  ("DCGM_FI_PROF_SM_OCCUPANCY", 0.01)]),
    ("gpm_tensor_util_percent", [("gpudoctor_gpu_tensor_active_ratio", 0.01),
                                 ("DCGM_FI_PROF_PIPE_TENSOR_ACTIVE", 0.01)]),
    ("gpm_fp64_util_percent", [("gpudoctor_gpu_fp64_active_ratio", 0.01), ("DCGM_FI_PROF_PIPE_FP64_ACTIVE", 0.01)]),
    ("gpm_fp32_util_percent", [("gpudoctor_gpu_fp32_active_ratio", 0.01), ("DCGM_FI_PROF_PIPE_FP32_ACTIVE", 0.01)]),
    ("gpm_fp16_util_percent", [("gpudoctor_gpu_fp16_active_ratio", 0.01), ("DCGM_FI_PROF_PIPE_FP16_ACTIVE", 0.01)]),
    ("gpm_dram_bw_util_percent", [("gpudoctor_gpu_dram_active_ratio", 0.01), ("DCGM_FI_PROF_DRAM_ACTIVE", 0.01)]),
    ("gpm_pcie_tx_mib_per_second", [("gpudoctor_gpu_pcie_tx_bytes_per_second", MIB),
                                    ("DCGM_FI_PROF_PCIE_TX_BYTES", MIB)]),
    ("gpm_pcie_rx_mib_per_second", [("gpudoctor_gpu_pcie_rx_bytes_per_second", MIB),
                                    ("DCGM_FI_PROF_PCIE_RX_BYTES", MIB)]),
    ("gpm_nvlink_tx_mib_per_second", [("gpudoctor_gpu_nvlink_tx_bytes_per_second", MIB),
                                      ("DCGM_FI_PROF_NVLINK_TX_BYTES", MIB)]),
    ("gpm_nvlink_rx_mib_per_second", [("gpudoctor_gpu_nvlink_rx_bytes_per_second", MIB),
                                      ("DCGM_FI_PROF_NVLINK_RX_BYTES", MIB)]),
    ("encoder_utilization_percent", [("gpudoctor_gpu_encoder_utilization_ratio", 0.01), ("DCGM_FI_DEV_ENC_UTIL", 1)]),
    ("decoder_utilization_percent", [("gpudoctor_gpu_decoder_utilization_ratio", 0.01), ("DCGM_FI_DEV_DEC_UTIL", 1)]),
    ("memory_reserved_mib", [("gpudoctor_gpu_memory_reserved_bytes", MIB), ("DCGM_FI_DEV_FB_RESERVED", 1)]),
]
GPM_NAMES = [name for key, names in READINGS if key.startswith("gpm_") for name, _ in names] + [
    "gpudoctor_gpu_nvlink_traffic_bytes_total", "DCGM_FI_DEV_NVLINK_BANDWIDTH_TOTAL"]


def scenario_values(path):
    """GPU index -> {key: value} for every key of FAKE_DEFAULTS and READINGS, and the set of keys each
    GPU marks not supported, as the fake NVML reads the file: built-in value, then [defaults], then
    [gpu.N]."""
    with open(path, "rb") as f:
        scenario = tomllib.load(f)
    defaults = scenario.get("defaults", {})
    values, unsupported = {}, {}
    for gpu in range(scenario["gpu_count"]):
        own = scenario.get("gpu", {}).get(str(gpu), {})
        merged = dict(FAKE_DEFAULTS)
        merged.update({key: 0 for key, _ in READINGS if key.startswith("gpm_")})
        merged.update(defaults)
        merged.update(own)
        values[gpu] = merged
        unsupported[gpu] = set(own.get("not_supported", defaults.get("not_supported", [])))
    return scenario, values, unsupported


SAMPLE = re.compile(r'^([A-Za-z_:][A-Za-z0-9_:]*)(?:\{(.*)\})? (\S+)$')
LABEL = re.compile(r'([A-Za-z_][A-Za-z0-9_]*)="((?:[^"\\]|\\.)*)"')


def parse_metrics(text):
    """name -> list of (labels, value)."""
    series = {}
    for line in text.splitlines():
        if not line or line.startswith("#"):
            continue
        match = SAMPLE.match(line)
        if not match:
            raise TestFailure(f"unparsable exposition line: {line!r}")
        labels = dict(LABEL.findall(match.group(2) or ""))
        series.setdefault(match.group(1), []).append((labels, float(match.group(3))))
    return series


def by_gpu(series, name):
    return {int(labels["gpu"]): value for labels, value in series.get(name, [])}


def close_to(actual, expected, relative=1e-9):
    return math.isclose(actual, expected, rel_tol=relative, abs_tol=1e-12)


def scrape(port):
    return parse_metrics(http_get(f"http://127.0.0.1:{port}/metrics")[1].decode())


def start_agents(args, workdir, daemons, ports):
    source_dir = os.path.abspath(args.source_dir)
    for name, scenario, port in (("gpm", GPM_SCENARIO, ports[0]), ("plain", PLAIN_SCENARIO, ports[1])):
        daemons.start(f"agent-{name}", [
            args.gpudoctor, "agent", "--simulate", os.path.join(source_dir, "examples", scenario), "--dcgm-names",
            "--hostname", f"host-{name}", "--listen", f"127.0.0.1:{port}",
            "--db", os.path.join(workdir, f"{name}.db"), "--log", "none", "--interval", "1s"])

    # GPM needs two samples: wait until the Hopper host exports its rates.
    def gpm_ready():
        daemons.check_alive()
        return len(by_gpu(scrape(ports[0]), "DCGM_FI_PROF_SM_ACTIVE")) == 8

    def plain_ready():
        daemons.check_alive()
        return "gpudoctor_gpu_temperature_celsius" in scrape(ports[1])
    wait_until("the Hopper agent's GPM readings", gpm_ready, 60)
    wait_until("the GPM-less agent's readings", plain_ready, 60)


def check_values(args, ports):
    source_dir = os.path.abspath(args.source_dir)
    scenario, expected, unsupported = scenario_values(os.path.join(source_dir, "examples", GPM_SCENARIO))
    failures = []
    first = scrape(ports[0])
    checked = 0
    for key, names in READINGS:
        for name, factor in names:
            got = by_gpu(first, name)
            for gpu, values in expected.items():
                if key in unsupported[gpu]:
                    if gpu in got:
                        failures.append(f"{name} GPU {gpu}: {got[gpu]}, but the scenario marks {key} not supported")
                    continue
                want = values[key] * factor
                if gpu not in got:
                    failures.append(f"{name} GPU {gpu}: absent, the scenario's {key} is {values[key]}")
                elif not close_to(got[gpu], want):
                    failures.append(f"{name} GPU {gpu}: {got[gpu]}, expected {want} ({key} = {values[key]})")
                else:
                    checked += 1

    # Every dcgm-exporter series names the driver and the host as dcgm-exporter does.
    for name, samples in first.items():
        if not name.startswith("DCGM_FI_"):
            continue
        for labels, _ in samples:
            if labels.get("DCGM_FI_DRIVER_VERSION") != scenario["driver_version"]:
                failures.append(f"{name}{labels}: DCGM_FI_DRIVER_VERSION is not {scenario['driver_version']}")
            if labels.get("Hostname") != "host-gpm" or "hostname" in labels:
                failures.append(f"{name}{labels}: the host should be in Hostname (released dcgm-exporter's label)")

    # Energy: one reading in joules and in millijoules, growing at the scenario's power draw.
    def energy(series):
        joules = by_gpu(series, "gpudoctor_gpu_energy_joules_total")
        millijoules = by_gpu(series, "DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION")
        taken = [v for _, v in series["gpudoctor_last_sample_timestamp_seconds"]][0]
        return joules, millijoules, taken

    # NVLink traffic: gpudoctor's counter grows at the scenario's NVLink rates; dcgm's name is that rate, sent and
    # received together, in whole MiB/s, as DCGM fills DCGM_FI_DEV_NVLINK_BANDWIDTH_TOTAL (a rate, typed counter).
    def nvlink(series):
        return (by_gpu(series, "gpudoctor_gpu_nvlink_traffic_bytes_total"),
                by_gpu(series, "DCGM_FI_DEV_NVLINK_BANDWIDTH_TOTAL"))

    j1, mj1, t1 = energy(first)
    n1, d1 = nvlink(first)
    time.sleep(4)
    later = scrape(ports[0])
    j2, mj2, t2 = energy(later)
    n2, d2 = nvlink(later)
    for gpu, values in expected.items():
        if gpu not in j1 or gpu not in mj1 or not close_to(j1[gpu] * 1000, mj1[gpu], 1e-12):
            failures.append(f"energy GPU {gpu}: {j1.get(gpu)} J against {mj1.get(gpu)} mJ")
            continue
        watts = (j2[gpu] - j1[gpu]) / (t2 - t1)
        if not close_to(watts, values["power_draw_w"], 0.02):
            failures.append(f"energy GPU {gpu}: grows at {watts:.1f} W, the scenario draws {values['power_draw_w']} W")
        want_mib = values["gpm_nvlink_tx_mib_per_second"] + values["gpm_nvlink_rx_mib_per_second"]
        if gpu not in n1 or d1.get(gpu) != math.floor(want_mib) or d2.get(gpu) != math.floor(want_mib):
            failures.append(f"NVLink bandwidth GPU {gpu}: {d1.get(gpu)} then {d2.get(gpu)} MiB/s under dcgm's name, "
                            f"the scenario's rates add up to {want_mib} MiB/s")
            continue
        rate = (n2[gpu] - n1[gpu]) / (t2 - t1)
        want = want_mib * MIB
        # The probe sums each interval's rates over the interval it measured, not the samples' timestamps.
        if not close_to(rate, want, 0.1):
            failures.append(f"NVLink traffic GPU {gpu}: grows at {rate:.0f} B/s, the scenario's rates are {want:.0f}")

    # The host without GPM: no GPM series at all, never a 0, and each GPU says why once.
    plain = scrape(ports[1])
    for name in GPM_NAMES:
        if name in plain:
            failures.append(f"{name} exported for GPUs without GPM: {plain[name][:2]}")
    if "DCGM_FI_DEV_GPU_TEMP" not in plain:
        failures.append("the GPM-less host lost its other dcgm-exporter names")
    status = subprocess.run([args.gpudoctor, "--simulate", os.path.join(source_dir, "examples", PLAIN_SCENARIO),
                             "status", "--json"], capture_output=True, text=True, timeout=60)
    gpus = json.loads(status.stdout)["gpus"]
    for gpu in gpus:
        notes = [n for n in gpu.get("notes", []) if "GPU Performance Monitoring" in n]
        if len(notes) != 1:
            failures.append(f"status --json GPU {gpu['index']}: {len(notes)} notes about GPM, expected 1: "
                            f"{gpu.get('notes')}")
        if gpu.get("gpm_supported") is not False or gpu.get("gpm_sm_active") is not None:
            failures.append(f"status --json GPU {gpu['index']}: gpm_supported {gpu.get('gpm_supported')}, "
                            f"gpm_sm_active {gpu.get('gpm_sm_active')}")
    print(f"{checked} readings matched the scenario")
    return failures


def dashboard_queries(path):
    """(what, query) for every panel target and query template variable, nested panels included."""
    with open(path) as f:
        dashboard = json.load(f)
    queries = []

    def walk(panels):
        for panel in panels:
            walk(panel.get("panels", []))
            for target in panel.get("targets", []):
                if target.get("expr"):
                    queries.append((f"panel {panel.get('title')!r}", target["expr"]))
    walk(dashboard.get("panels", []))
    for variable in dashboard.get("templating", {}).get("list", []):
        if variable.get("type") == "query":
            query = variable["query"]["query"] if isinstance(variable["query"], dict) else variable["query"]
            queries.append((f"variable {variable['name']!r}", query))
    return queries


def run_dashboard(args, workdir, daemons, ports):
    prometheus = shutil.which("prometheus")
    if not prometheus:
        print("SKIPPED: needs the prometheus binary (apt-get install prometheus)")
        return SKIP
    source_dir = os.path.abspath(args.source_dir)
    prometheus_port = free_ports(1)[0]
    config = os.path.join(workdir, "prometheus.yml")
    with open(config, "w") as f:
        f.write("global:\n  scrape_interval: 1s\n  scrape_timeout: 1s\nscrape_configs:\n  - job_name: gpudoctor\n"
                f"    static_configs:\n      - targets: ['127.0.0.1:{ports[0]}', '127.0.0.1:{ports[1]}']\n")
    daemons.start("prometheus", [prometheus, f"--config.file={config}",
                                 f"--storage.tsdb.path={os.path.join(workdir, 'prom-data')}",
                                 f"--web.listen-address=127.0.0.1:{prometheus_port}"])
    gpm_instance = f"127.0.0.1:{ports[0]}"

    def scraped():
        daemons.check_alive()
        result = prometheus_query(prometheus_port, f'DCGM_FI_PROF_PIPE_TENSOR_ACTIVE{{instance="{gpm_instance}"}}')
        return len(result) == 8
    wait_until("Prometheus to hold the Hopper host's profiling series", scraped, 60)

    _, expected, _ = scenario_values(os.path.join(source_dir, "examples", GPM_SCENARIO))
    profiling = {"DCGM_FI_PROF_GR_ENGINE_ACTIVE": "gpm_graphics_util_percent",
                 "DCGM_FI_PROF_PIPE_TENSOR_ACTIVE": "gpm_tensor_util_percent"}
    failures = []
    queries = []
    for dashboard in DASHBOARDS:
        found = dashboard_queries(os.path.join(source_dir, "testdata", "dcgm_exporter", dashboard))
        if len(found) < 10:
            failures.append(f"only {len(found)} queries found in {dashboard}: is it the file it should be?")
        queries += [(f"{dashboard}: {what}", query) for what, query in found]
    for what, query in queries:
        # Grafana's "All" for a multi-value variable is a regex matching everything.
        expr = query
        for variable in ("instance", "gpu", "hostname"):
            expr = expr.replace(f"${{{variable}}}", ".*").replace(f"${variable}", ".*")
        label_values = re.fullmatch(r"label_values\((\w+),\s*(\w+)\)", expr)
        if label_values:
            metric, label = label_values.groups()
            values = {r["metric"].get(label) for r in prometheus_query(prometheus_port, metric)}
            want = {"instance": {gpm_instance}, "Hostname": {"host-gpm"}}.get(label, {str(g) for g in range(8)})
            if not want <= values:
                failures.append(f"{what}: {query} gives {sorted(v for v in values if v)}, lacking {want - values}")
            continue
        result = prometheus_query(prometheus_port, expr)
        mine = [r for r in result if r["metric"].get("instance", gpm_instance) == gpm_instance]
        if not mine:
            failures.append(f"{what}: {expr} shows nothing for the Hopper host")
            continue
        per_gpu = "gpu" in mine[0]["metric"]
        if per_gpu and sorted(int(r["metric"]["gpu"]) for r in mine) != list(range(8)):
            failures.append(f"{what}: {expr} shows GPUs {sorted(r['metric'].get('gpu') for r in mine)}, not 0-7")
        for name, key in profiling.items():
            if not expr.startswith(name + "{"):
                continue
            for r in mine:
                gpu = int(r["metric"]["gpu"])
                want = expected[gpu][key] / 100
                if not close_to(float(r["value"][1]), want):
                    failures.append(f"{what}: GPU {gpu} shows {r['value'][1]}, the scenario's {key} gives {want}")
        print(f"{what}: {len(mine)} series")
    return failures


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--gpudoctor", required=True)
    parser.add_argument("--source-dir", default=".")
    parser.add_argument("--part", choices=["values", "dashboard"], required=True)
    args = parser.parse_args()
    args.gpudoctor = os.path.abspath(args.gpudoctor)
    with tempfile.TemporaryDirectory(prefix="gpudoctor-dcgm-") as workdir:
        daemons = Daemons(workdir)
        try:
            ports = free_ports(2)
            if args.part == "dashboard" and not shutil.which("prometheus"):
                print("SKIPPED: needs the prometheus binary (apt-get install prometheus)")
                return SKIP
            start_agents(args, workdir, daemons, ports)
            if args.part == "values":
                failures = check_values(args, ports)
            else:
                failures = run_dashboard(args, workdir, daemons, ports)
                if failures == SKIP:
                    return SKIP
            if failures:
                print("FAILED:\n  " + "\n  ".join(failures), file=sys.stderr)
                daemons.print_logs()
                return 1
            print("passed")
            return 0
        except TestFailure as failure:
            print(f"FAILED: {failure}", file=sys.stderr)
            daemons.print_logs()
            return 1
        finally:
            daemons.close()


if __name__ == "__main__":
    sys.exit(main())
