#!/usr/bin/env python3
"""Fleet simulation: many simulated GPU hosts, one real Prometheus, faults from a published mix.

Starts N `gpudoctor agent --simulate` hosts (8 GPUs each, unique serials and uuids, their own
--hostname and --db), one real Prometheus scraping them as job "gpudoctor" with the shipped rules
(deploy/prometheus-rules.yml), and injects GPU faults drawn from the Llama 3 failure mix
(/work/shared/fleet-failure-stats.md; FAILURE_MIX below). It stages card swaps between hosts (a bad
card whose errors follow its serial, a bad slot whose errors stay put), then reads the fleet with
`gpudoctor fleet --json`, `fleet offenders --json`, `fleet attribution --json` and `fleet gpu SERIAL`,
and reports, per fault type: injected, detected, time to detect (from injection until the host's row
in `gpudoctor fleet` shows the finding, polled), false positives (fault-free hosts flagged), and
whether attribution was right on every staged swap. It also measures `gpudoctor fleet`'s answer time
against the same Prometheus answering a bare `up` query, the agents' CPU and peak RSS, Prometheus's
RSS, scrape bytes per host and series per GPU.

    bench/fleet_sim.py --gpudoctor build/bin/gpudoctor --quick                  # about 3 minutes
    bench/fleet_sim.py --gpudoctor build/bin/gpudoctor --hosts 200 --interval 5s --json-out fleet.json

How faults map to scenario files (docs/scenarios.md), per component of the mix:

| component (count)           | injected as                                                           |
|-----------------------------|-----------------------------------------------------------------------|
| Faulty GPU (148)            | xid79_fell_off_bus: Xid 79 and the GPU lost to NVML ([[gpu_lost]])    |
| GPU HBM3 memory (72)        | half hbm3_uncorrectable_ecc: volatile uncorrectable ECC rising,        |
|                             | Xid 48 repeating, a row remap pending (Xid 63); half                  |
|                             | hbm3_row_remap_failure: Xid 64, remapped rows rising, remap failure   |
| GPU SRAM memory (19)        | sram_uncontained_ecc: Xid 95 (uncontained ECC) and one uncorrectable  |
|                             | volatile ECC error (H100 counts SRAM errors in the ECC totals)        |
| GPU system processor (17)   | gsp_rpc_timeout: Xid 119 repeating                                    |
| GPU thermal interface (6)   | thermal_interface: one loaded GPU heats to 93 °C, thermal slowdown    |
| Silent data corruption (6)  | not injected: NVML cannot see it; only `gpudoctor diag` (verified     |
|                             | products) finds it. Counted as "GPU, not visible to a monitor".       |
| every other component       | not a GPU fault (network, host, software): counted, not injected      |

Staged swaps (the card-or-slot experiment). A suspect card errs in its slot for --error-window,
then its host is drained (errors stop) for --drain, then the suspect card and a good card from a
fault-free host trade places: both hosts' agents restart on scenarios with the cards exchanged.
  bad card  (hbm3_uncorrectable_ecc on the card): the errors follow the serial to the other host;
            attribution must blame the card (errors from one serial in two slots);
  bad slot  (pcie_slot_replays: PCIe replay bursts and a link trained down to x8, the marks of a
            bad riser or slot): the errors stay in the slot with the good card;
            attribution must blame the slot (errors from two serials in one slot).
The drain is more than two query steps long so that the errors before the swap cannot be mistaken
for the incoming card's: `fleet` reads errors in steps of max(15 s, range/720), and gives an error to
the card its slot showed at that moment.

Findings the simulated hosts raise from the real machine they all share (disk_space, host_pressure,
host_memory, ...: HOST_MACHINE_RULES) are reported apart: they are true of this machine, not false
positives of the simulation, and appear on every host at once.

Exit status: 0 the run completed (see "pass" in the JSON: every injected GPU fault detected, no GPU
false positive, attribution right on every staged swap); 1 it completed and a criterion failed;
2 the run itself failed; 77 prometheus is not installed (`apt-get install prometheus`).
Python's standard library only.
"""

import argparse
import gzip
import hashlib
import json
import math
import os
import random
import re
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.parse
import urllib.request

SKIP = 77
GPUS_PER_HOST = 8
# PCI bus of each GPU index: the fake NVML's default HGX H100 board (docs/scenarios.md).
PCI_BUS_IDS = ["0000:1b:00.0", "0000:43:00.0", "0000:52:00.0", "0000:61:00.0",
               "0000:9d:00.0", "0000:c3:00.0", "0000:d1:00.0", "0000:df:00.0"]

# The Llama 3 405B pre-training interruptions (Meta, arXiv 2407.21783, Table 5): component, category,
# count, and the fault kinds it is injected as (None: not injected, with the reason).
FAILURE_MIX = [
    ("Faulty GPU", "GPU", 148, ["xid79_fell_off_bus"], None),
    ("GPU HBM3 memory", "GPU", 72, ["hbm3_uncorrectable_ecc", "hbm3_row_remap_failure"], None),
    ("Software bug", "Dependency", 54, None, "not a GPU fault"),
    ("Network switch/cable", "Network", 35, None, "not a GPU fault"),
    ("Host maintenance", "Unplanned maintenance", 32, None, "not a GPU fault"),
    ("GPU SRAM memory", "GPU", 19, ["sram_uncontained_ecc"], None),
    ("GPU system processor (GSP)", "GPU", 17, ["gsp_rpc_timeout"], None),
    ("NIC", "Host", 7, None, "not a GPU fault"),
    ("NCCL watchdog timeouts", "Unknown", 7, None, "not a GPU fault"),
    ("Silent data corruption", "GPU", 6, None, "GPU, not visible to NVML (gpudoctor diag finds it)"),
    ("GPU thermal interface + sensor", "GPU", 6, ["thermal_interface"], None),
    ("SSD", "Host", 3, None, "not a GPU fault"),
    ("Power supply", "Host", 3, None, "not a GPU fault"),
    ("Server chassis", "Host", 2, None, "not a GPU fault"),
    ("IO expansion board", "Host", 2, None, "not a GPU fault"),
    ("Dependency", "Dependency", 2, None, "not a GPU fault"),
    ("CPU", "Host", 2, None, "not a GPU fault"),
    ("System memory", "Host", 2, None, "not a GPU fault"),
]

# What each fault kind should raise on its GPU (any one of them counts as detected). xid_burst is
# the host-wide root finding several GPUs' Xids at once collapse into.
FAULT_KINDS = {
    "xid79_fell_off_bus": {"component": "Faulty GPU",
                           "expect": {"gpu_lost", "gpu_unreachable", "xid_recent", "xid_burst"}},
    "hbm3_uncorrectable_ecc": {"component": "GPU HBM3 memory",
                               "expect": {"ecc_uncorrectable", "xid_recent", "remapped_rows_pending", "xid_burst"}},
    "hbm3_row_remap_failure": {"component": "GPU HBM3 memory",
                               "expect": {"row_remap_failure", "xid_recent", "xid_burst"}},
    "sram_uncontained_ecc": {"component": "GPU SRAM memory",
                             "expect": {"xid_recent", "ecc_uncorrectable", "xid_burst"}},
    "gsp_rpc_timeout": {"component": "GPU system processor (GSP)", "expect": {"xid_recent", "xid_burst"}},
    "thermal_interface": {"component": "GPU thermal interface + sensor",
                          "expect": {"temperature_high", "clock_throttle"}},
    "pcie_slot_replays": {"component": "Faulty GPU (suspected; a bad slot in fact)",
                          "expect": {"pcie_replay", "pcie_link_degraded"}},
}

# Rules that judge the machine itself (disks, memory, CPU pressure, IPMI, upkeep): every simulated host
# reads the same real machine, so these are reported apart from the simulation's false positives.
HOST_MACHINE_RULES = {"disk_space", "host_hung_tasks", "host_memory", "host_pressure", "psu_fault",
                      "sensor_alarm", "inlet_temperature", "log_errors", "process_missing", "backup_stale",
                      "maintenance_due"}

HEALTHY_BASE = """\
driver_version = "550.54.15"
gpu_count = 8
xid_lookback = "0s"

[defaults]
temperature_c = 64
memory_temperature_c = 72
power_draw_w = 618
sm_clock_mhz = 1980
memory_clock_mhz = 2619
utilization_gpu_percent = 96
utilization_memory_percent = 57
clock_event_reasons = []
processes = [{ pid = 48213, name = "python3", used_memory_mib = 71234 }]

[defaults.jitter]
temperature_c = 1.5
memory_temperature_c = 1
power_draw_w = 35
utilization_gpu_percent = 3
utilization_memory_percent = 5
"""


class RunFailure(Exception):
    pass


def log(message):
    print(f"[fleet_sim {time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


def parse_seconds(text):
    match = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*(ms|s|m|h)?\s*", str(text))
    if not match:
        raise argparse.ArgumentTypeError(f"not a duration: {text!r} (e.g. 5s, 2m)")
    value, unit = float(match.group(1)), match.group(2) or "s"
    return value * {"ms": 0.001, "s": 1, "m": 60, "h": 3600}[unit]


def free_ports(count):
    """Distinct free loopback ports: all bound at once (so they differ), then released."""
    sockets = []
    try:
        for _ in range(count):
            s = socket.socket()
            s.bind(("127.0.0.1", 0))
            sockets.append(s)
        return [s.getsockname()[1] for s in sockets]
    finally:
        for s in sockets:
            s.close()


def http_get(url, timeout=10, headers=None):
    request = urllib.request.Request(url, headers=headers or {})
    with urllib.request.urlopen(request, timeout=timeout) as response:
        return response.status, response.read(), dict(response.headers)


def percentile(values, fraction):
    ordered = sorted(values)
    if not ordered:
        return None
    rank = max(0, math.ceil(fraction * len(ordered)) - 1)
    return ordered[rank]


# ---------------------------------------------------------------------------------------------------
# Cards, hosts, faults and their scenario files.

class Card:
    def __init__(self, host_index, gpu_index):
        self.serial = f"1655{host_index:05d}{gpu_index:04d}"
        digest = hashlib.sha256(self.serial.encode()).hexdigest()
        self.uuid = f"GPU-{digest[0:8]}-{digest[8:12]}-{digest[12:16]}-{digest[16:20]}-{digest[20:32]}"


class Fault:
    """An error generator in one slot of one host, from `start` until `stop` (scenario seconds)."""

    def __init__(self, kind, gpu, start, stop=None, swap=None):
        self.kind = kind
        self.gpu = gpu
        self.start = start
        self.stop = stop
        self.swap = swap  # "card" or "slot" when it is a staged swap's suspect

    def toml(self, horizon):
        """Scenario entries for this fault; repeating events run until `stop` or `horizon`."""
        g, t0 = self.gpu, self.start
        end = self.stop if self.stop is not None else horizon
        over = max(1, int(end - t0))
        out = []

        def xids(code, every, first=None):
            t = t0 if first is None else first
            while t < end:
                out.append(f"[[xid]]\ngpu = {g}\nat = {t:.0f}\nxid = {code}\n")
                t += every

        def timeline(field, **kw):
            body = "".join(f"{k} = {json.dumps(v)}\n" for k, v in kw.items())
            out.append(f"[[timeline]]\ngpu = {g}\nfield = \"{field}\"\n{body}")

        if self.kind == "xid79_fell_off_bus":
            out.append(f"[[gpu_lost]]\ngpu = {g}\nat = {t0:.0f}\n")
            out.append(f"[[xid]]\ngpu = {g}\nat = {t0:.0f}\nxid = 79\n")
        elif self.kind == "hbm3_uncorrectable_ecc":
            timeline("ecc_volatile_uncorrected", at=int(t0), rate=1, per="2s", over=f"{over}s")
            timeline("remapped_rows_pending", at=int(t0), set=True)
            xids(48, 5)
            out.append(f"[[xid]]\ngpu = {g}\nat = {t0 + 1:.0f}\nxid = 63\n")
        elif self.kind == "hbm3_row_remap_failure":
            timeline("remapped_rows_uncorrectable", at=int(t0), rate=1, per="5s", over=f"{over}s")
            timeline("remapped_rows_failure", at=int(t0), set=True)
            xids(64, 20)
        elif self.kind == "sram_uncontained_ecc":
            timeline("ecc_volatile_uncorrected", at=int(t0), set=1)
            xids(95, 20)
        elif self.kind == "gsp_rpc_timeout":
            xids(119, 20)
        elif self.kind == "thermal_interface":
            timeline("temperature_c", at=int(t0), to=93, over="20s")
            timeline("clock_event_reasons", at=int(t0) + 12, set=["sw_thermal_slowdown", "hw_thermal_slowdown"])
            timeline("sm_clock_mhz", at=int(t0) + 12, to=1350, over="8s")
        elif self.kind == "pcie_slot_replays":
            timeline("pcie_replay_count", at=int(t0), rate=20, per="1s", over=f"{over}s")
            timeline("pcie_width_current", at=int(t0), set=8)
        else:
            raise ValueError(self.kind)
        return "\n".join(out)


class Host:
    def __init__(self, index, port):
        self.index = index
        self.name = f"sim-{index:04d}"
        self.port = port
        self.cards = [Card(index, gpu) for gpu in range(GPUS_PER_HOST)]
        self.faults = []       # the scenario's faults now
        self.injected = []     # every fault record (dicts in the report) that ever sat on this host
        self.role = "control"  # control, faulty, swap-suspect, swap-partner
        self.proc = None
        self.generation = 0
        self.restarting_since = None  # wall time the agent was stopped for a swap, until it answers again
        self.fault_from_s = math.inf  # scenario time of its first fault: fault-free before it

    def scenario(self, horizon):
        parts = [f'description = "fleet_sim {self.name} generation {self.generation}"', HEALTHY_BASE]
        for gpu, card in enumerate(self.cards):
            parts.append(f'[gpu.{gpu}]\nserial = "{card.serial}"\nuuid = "{card.uuid}"\n')
        for fault in self.faults:
            parts.append(fault.toml(horizon))
        return "\n".join(parts) + "\n"


# ---------------------------------------------------------------------------------------------------
# Processes.

class Processes:
    """Every process this run starts, each in its own process group (the agent and its NVML probe),
    all stopped on close."""

    def __init__(self, workdir):
        self.workdir = workdir
        self.procs = []

    def start(self, name, argv, env=None):
        log_path = os.path.join(self.workdir, f"{name}.log")
        with open(log_path, "ab") as out:
            proc = subprocess.Popen(argv, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                    cwd=self.workdir, env=env, start_new_session=True)
        proc.log_path = log_path
        proc.name = name
        self.procs.append(proc)
        return proc

    @staticmethod
    def stop(proc, grace=10):
        if proc.poll() is None:
            try:
                os.killpg(proc.pid, signal.SIGTERM)
            except ProcessLookupError:
                pass
            try:
                proc.wait(timeout=grace)
            except subprocess.TimeoutExpired:
                pass
        try:  # the group: a probe left behind by an agent that did not stop cleanly
            os.killpg(proc.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
        kill_session(proc.pid)
        if proc.poll() is None:
            proc.wait()

    def close(self):
        alive = [p for p in self.procs if p.poll() is None]
        for proc in alive:
            try:
                os.killpg(proc.pid, signal.SIGTERM)
            except ProcessLookupError:
                pass
        deadline = time.monotonic() + 15
        for proc in alive:
            try:
                proc.wait(timeout=max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                pass
        for proc in self.procs:
            try:
                os.killpg(proc.pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass
            kill_session(proc.pid)
            if proc.poll() is None:
                proc.wait()


def kill_session(session_id):
    """SIGKILL what is left of a session this script created (start_new_session: its id is the pid of
    the process started), including a process that left the process group."""
    for entry in os.listdir("/proc"):
        if not entry.isdigit() or int(entry) == session_id:
            continue
        try:
            with open(f"/proc/{entry}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[3]) == session_id:  # field 6 of stat: the session id
            try:
                os.kill(int(entry), signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass


def proc_children(pid):
    children = []
    try:
        for task in os.listdir(f"/proc/{pid}/task"):
            with open(f"/proc/{pid}/task/{task}/children") as f:
                children += [int(c) for c in f.read().split()]
    except OSError:
        pass
    return children


def proc_cpu_seconds(pid, with_reaped=True):
    """utime + stime (and the reaped children's cutime + cstime) of a process, in seconds."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    ticks = os.sysconf("SC_CLK_TCK")
    own = int(fields[11]) + int(fields[12])
    reaped = int(fields[13]) + int(fields[14]) if with_reaped else 0
    return (own + reaped) / ticks


def proc_status_kib(pid, key):
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith(key + ":"):
                    return int(line.split()[1])
    except OSError:
        pass
    return 0


def host_usage(pid):
    """CPU seconds and peak RSS of an agent and its live children (the NVML probe)."""
    cpu = proc_cpu_seconds(pid)
    hwm = proc_status_kib(pid, "VmHWM")
    rss = proc_status_kib(pid, "VmRSS")
    child_hwm = child_rss = 0
    for child in proc_children(pid):
        cpu += proc_cpu_seconds(child)
        child_hwm += proc_status_kib(child, "VmHWM")
        child_rss += proc_status_kib(child, "VmRSS")
    return {"cpu_s": cpu, "agent_hwm_kib": hwm, "probe_hwm_kib": child_hwm, "agent_rss_kib": rss,
            "probe_rss_kib": child_rss}


# ---------------------------------------------------------------------------------------------------
# The run.

class FleetSim:
    def __init__(self, args, workdir):
        self.args = args
        self.workdir = workdir
        self.gpudoctor = os.path.abspath(args.gpudoctor)
        self.source_dir = os.path.abspath(args.source_dir)
        self.processes = Processes(workdir)
        self.rng = random.Random(args.seed)
        self.faults = []      # report records, one per injected fault (swap errors after a move included)
        self.swaps = []
        self.not_injected = {}  # component -> draws not injected
        self.mix_draws = {}     # component -> draws
        self.polls = 0
        self.poll_seconds = []
        self.false_positives = {}  # hostname -> {finding descriptions}
        self.machine_findings = {}  # rule id -> hosts
        self.unexpected_on_faulty = {}  # hostname -> {finding descriptions}
        self.not_answering = {}    # hostname -> count of polls, outside staged restarts
        self.silent_since = {}     # hostname -> (first, last) seconds of the stretch of polls it is not answering
        self.silent_stretches = []  # every such stretch once over: hostname, from, to, Prometheus's reason
        self.attribution_checkpoints = []

    # -- set-up --------------------------------------------------------------------------------------
    def plan(self):
        a = self.args
        ports = free_ports(a.hosts + 1)
        self.prometheus_port = ports[0]
        self.hosts = [Host(i, port) for i, port in enumerate(ports[1:])]
        # Timeline, in whole seconds after the shared scenario epoch (whole, so that a timeline change
        # and an Xid of the same fault start at the same moment).
        self.t_inject = round(a.lead)
        self.t_stop = self.t_inject + round(a.error_window)  # swap suspects' errors stop (the host is drained)
        self.t_swap = self.t_stop + round(a.drain)            # the cards trade places
        self.t_post_errors = self.t_swap + round(a.post_swap_delay)
        self.t_end = max(round(a.duration), self.t_swap + round(a.observe))
        self.horizon = self.t_end + 600

        free = list(range(a.hosts))
        self.rng.shuffle(free)
        # Staged swaps: pairs of (suspect host, partner host), alternately a bad card and a bad slot.
        needed = 2 * a.swaps
        if needed > len(free):
            raise RunFailure(f"--swaps {a.swaps} needs {needed} hosts")
        for k in range(a.swaps):
            suspect, partner = self.hosts[free.pop()], self.hosts[free.pop()]
            blame = "card" if k % 2 == 0 else "slot"
            kind = "hbm3_uncorrectable_ecc" if blame == "card" else "pcie_slot_replays"
            suspect_gpu, partner_gpu = self.rng.randrange(GPUS_PER_HOST), self.rng.randrange(GPUS_PER_HOST)
            start = self.t_inject + self.rng.randint(0, round(a.inject_spread) // 2)
            fault = Fault(kind, suspect_gpu, start, stop=self.t_stop, swap=blame)
            suspect.faults.append(fault)
            suspect.role, partner.role = "swap-suspect", "swap-partner"
            record = self.record_fault(suspect, fault, f"staged swap ({blame})")
            self.swaps.append({"blame": blame, "kind": kind, "suspect_host": suspect, "suspect_gpu": suspect_gpu,
                               "partner_host": partner, "partner_gpu": partner_gpu,
                               "suspect_serial": suspect.cards[suspect_gpu].serial,
                               "partner_serial": partner.cards[partner_gpu].serial, "record": record})

        # Faults from the mix.
        if a.quick:
            draws = ["xid79_fell_off_bus", "hbm3_row_remap_failure", "sram_uncontained_ecc", "gsp_rpc_timeout",
                     "thermal_interface"]  # with the staged swaps' two: one fault of each kind
            for component, _, _, kinds, _ in FAILURE_MIX:
                self.mix_draws[component] = sum(1 for d in draws if kinds and d in kinds)
            self.mix_draws["GPU HBM3 memory"] += sum(1 for s in self.swaps if s["blame"] == "card")
            self.mix_draws["Faulty GPU"] += sum(1 for s in self.swaps if s["blame"] == "slot")
        else:
            weights = [count for _, _, count, _, _ in FAILURE_MIX]
            draws = []
            for _ in range(a.faults):
                component, _, _, kinds, why = self.rng.choices(FAILURE_MIX, weights=weights)[0]
                self.mix_draws[component] = self.mix_draws.get(component, 0) + 1
                if kinds is None:
                    self.not_injected[why] = self.not_injected.get(why, 0) + 1
                else:
                    draws.append(self.rng.choice(kinds))
        for kind in draws:
            if not free:
                raise RunFailure(f"more GPU faults than hosts to put them on: raise --hosts or lower --faults")
            host = self.hosts[free.pop()]
            fault = Fault(kind, self.rng.randrange(GPUS_PER_HOST),
                          self.t_inject + self.rng.randint(0, round(a.inject_spread)))
            host.faults.append(fault)
            host.role = "faulty"
            self.record_fault(host, fault, "mix")

    def record_fault(self, host, fault, origin):
        record = {"kind": fault.kind, "component": FAULT_KINDS[fault.kind]["component"], "origin": origin,
                  "hostname": host.name, "gpu": fault.gpu, "serial": host.cards[fault.gpu].serial,
                  "pci_bus_id": PCI_BUS_IDS[fault.gpu], "injected_at_s": round(fault.start, 1),
                  "detected": False, "time_to_detect_s": None, "findings_seen": [], "in_offenders": None}
        record["_fault"] = fault
        self.faults.append(record)
        host.injected.append(record)
        host.fault_from_s = min(host.fault_from_s, fault.start)
        return record

    def write_scenario(self, host):
        path = os.path.join(self.workdir, f"{host.name}.g{host.generation}.toml")
        with open(path, "w") as f:
            f.write(host.scenario(self.horizon))
        return path

    def start_agent(self, host):
        scenario = self.write_scenario(host)
        env = dict(os.environ, GPUDOCTOR_FAKE_EPOCH_MS=str(self.epoch_ms))
        host.proc = self.processes.start(f"agent-{host.name}-g{host.generation}", [
            self.gpudoctor, "agent", "--simulate", scenario, "--hostname", host.name,
            "--listen", f"127.0.0.1:{host.port}", "--db", os.path.join(self.workdir, f"{host.name}.db"),
            "--log", "none", "--interval", self.args.interval], env=env)

    def prometheus_config(self):
        scrape = self.args.scrape_interval
        targets = ", ".join(f"'127.0.0.1:{h.port}'" for h in self.hosts)
        return f"""global:
  scrape_interval: {scrape}
  scrape_timeout: {scrape}
  evaluation_interval: {scrape}
rule_files:
  - '{os.path.join(self.source_dir, "deploy", "prometheus-rules.yml")}'
scrape_configs:
  - job_name: gpudoctor
    static_configs:
      - targets: [{targets}]
"""

    def start(self):
        self.epoch = time.time()
        self.epoch_ms = int(self.epoch * 1000)
        for i, host in enumerate(self.hosts):
            self.start_agent(host)
            if i % 10 == 9:
                time.sleep(0.05)  # spread the probes' start-up a little
        config = os.path.join(self.workdir, "prometheus.yml")
        with open(config, "w") as f:
            f.write(self.prometheus_config())
        self.prometheus = self.processes.start("prometheus", [
            self.args.prometheus, f"--config.file={config}",
            f"--storage.tsdb.path={os.path.join(self.workdir, 'prom-data')}",
            f"--web.listen-address=127.0.0.1:{self.prometheus_port}",
            "--enable-feature=extra-scrape-metrics"])
        self.prom_url = f"http://127.0.0.1:{self.prometheus_port}"
        deadline = time.time() + 120
        while True:
            self.check_alive()
            try:
                if http_get(self.prom_url + "/-/ready", timeout=2)[0] == 200:
                    break
            except (OSError, urllib.error.URLError):
                pass
            if time.time() > deadline:
                raise RunFailure("Prometheus did not become ready in 120 s")
            time.sleep(0.25)
        # Every target up, every host named (the rules' instance:gpudoctor:hostname).
        while True:
            self.check_alive()
            try:
                up = self.query(f'sum(up{{job="gpudoctor"}})')
                named = self.query("count(instance:gpudoctor:hostname)")
                n_up = float(up[0]["value"][1]) if up else 0
                n_named = float(named[0]["value"][1]) if named else 0
                if n_up == len(self.hosts) and n_named == len(self.hosts):
                    break
            except (OSError, urllib.error.URLError, ValueError):
                pass
            if time.time() > deadline:
                raise RunFailure(f"not every agent was scraped within 120 s (up: {n_up}/{len(self.hosts)})")
            time.sleep(0.5)
        self.ready_at = time.time() - self.epoch
        log(f"{len(self.hosts)} agents scraped and named {self.ready_at:.1f} s after start")
        if self.ready_at > self.t_inject:
            raise RunFailure(f"the fleet was ready {self.ready_at:.0f} s after start, after the first injection "
                             f"at {self.t_inject:.0f} s: raise --lead")

    def check_alive(self):
        for host in self.hosts:
            if host.proc is not None and host.proc.poll() is not None and host.restarting_since is None:
                raise RunFailure(f"agent {host.name} exited with status {host.proc.returncode} "
                                 f"(log: {host.proc.log_path})")
        if getattr(self, "prometheus", None) is not None and self.prometheus.poll() is not None:
            raise RunFailure(f"prometheus exited with status {self.prometheus.returncode}")

    # -- reading the fleet ---------------------------------------------------------------------------
    def query(self, promql):
        url = f"{self.prom_url}/api/v1/query?" + urllib.parse.urlencode({"query": promql})
        _, body, _ = http_get(url)
        answer = json.loads(body)
        if answer.get("status") != "success":
            raise ValueError(f"query {promql!r}: {answer}")
        return answer["data"]["result"]

    def fleet(self, *view, extra=(), timeout=120, ok=(0, 1, 2)):
        """One `gpudoctor fleet VIEW --json`: (parsed answer, seconds, exit status); 0, 1 and 2 say how the
        fleet is, anything else is a failure of the run."""
        argv = [self.gpudoctor, "fleet", *view, "--prometheus", self.prom_url, "--json", *extra]
        started = time.monotonic()
        done = subprocess.run(argv, capture_output=True, text=True, timeout=timeout)
        elapsed = time.monotonic() - started
        if done.returncode not in ok:
            raise RunFailure(f"{' '.join(argv)} exited {done.returncode}: {done.stderr.strip()[:500]}")
        try:
            return json.loads(done.stdout), elapsed, done.returncode
        except ValueError as error:
            raise RunFailure(f"{' '.join(argv)}: not JSON ({error}): {done.stdout[:300]!r}") from error

    @staticmethod
    def row_findings(row):
        """(id, gpu, severity) of every root finding a checklist row shows."""
        found = []
        for item in row.get("items", []):
            for finding in item.get("findings", []):
                if not finding.get("part_of"):  # told by its root
                    found.append((finding.get("id", ""), str(finding.get("gpu", "")), finding.get("severity", "")))
        for finding in row.get("other_findings", []):
            found.append((finding.get("id", ""), str(finding.get("gpu", "")), finding.get("severity", "")))
        return found

    def poll(self):
        """One `gpudoctor fleet --json`: detections, false positives.

        Times are taken when the answer arrives: a fault injected while the command ran may already
        show, so that is the earliest moment the fleet can be said to have shown it, and a host is a
        false positive only when its finding came before its first fault at that moment too."""
        checklist, elapsed, _ = self.fleet()
        at = time.time()
        self.polls += 1
        self.poll_seconds.append(elapsed)
        rows = {row["hostname"]: row for row in checklist.get("hosts", [])}
        restarting = [h for h in self.hosts if h.restarting_since is not None]
        if restarting:  # back when Prometheus has scraped the new agent and the fleet shows it answering
            started = {r["metric"].get("instance"): float(r["value"][1])
                       for r in self.query('gpudoctor_start_time_seconds{job="gpudoctor"}')}
            for host in restarting:
                row = rows.get(host.name)
                if (started.get(f"127.0.0.1:{host.port}", 0) >= host.restarting_since - 1 and row and
                        row.get("answering") and host.proc.poll() is None):
                    host.restarting_since = None
        for host in self.hosts:
            row = rows.get(host.name)
            if host.restarting_since is not None:
                continue
            if row is None:
                continue
            if not row.get("answering", True):
                self.not_answering[host.name] = self.not_answering.get(host.name, 0) + 1
                first, _, reason = self.silent_since.get(host.name, (at - self.epoch, None, None))
                self.silent_since[host.name] = (first, at - self.epoch, reason or self.scrape_error(host))
                continue
            self.end_silence(host.name)
            findings = self.row_findings(row)
            machine = [f for f in findings if f[0] in HOST_MACHINE_RULES and not f[1]]
            for rule, _, _ in machine:
                self.machine_findings.setdefault(rule, set()).add(host.name)
            gpu_findings = [f for f in findings if f not in machine]
            active = [r for r in host.injected if self.epoch + r["injected_at_s"] <= at]
            for record in active:
                fault = record["_fault"]
                expect = FAULT_KINDS[fault.kind]["expect"]
                hits = [f for f in gpu_findings if f[0] in expect and (f[1] == str(fault.gpu) or not f[1])]
                if hits and not record["detected"]:
                    record["detected"] = True
                    record["time_to_detect_s"] = round(at - (self.epoch + record["injected_at_s"]), 2)
                    record["findings_seen"] = sorted({f"{i} gpu {g}" if g else i for i, g, _ in hits})
                    log(f"detected {record['kind']} on {host.name} gpu {fault.gpu} after "
                        f"{record['time_to_detect_s']} s: {', '.join(record['findings_seen'])}")
            if at - self.epoch < host.fault_from_s:
                if gpu_findings:
                    self.false_positives.setdefault(host.name, set()).update(
                        f"{i} gpu {g} ({s})" if g else f"{i} ({s})" for i, g, s in gpu_findings)
            else:
                faulted_gpus = {str(r["_fault"].gpu) for r in active}
                for i, g, s in gpu_findings:
                    if g and g not in faulted_gpus:
                        self.unexpected_on_faulty.setdefault(host.name, set()).add(f"{i} gpu {g} ({s})")
        return checklist

    def scrape_error(self, host):
        """Prometheus's own word on a target it could not scrape: its last error and how long the scrape took."""
        try:
            _, body, _ = http_get(f"{self.prom_url}/api/v1/targets?state=active")
            for target in json.loads(body)["data"]["activeTargets"]:
                if target.get("labels", {}).get("instance") == f"127.0.0.1:{host.port}":
                    return (f"{target.get('lastError') or 'no error'} (last scrape took "
                            f"{float(target.get('lastScrapeDuration', 0)):.2f} s)")
        except (OSError, urllib.error.URLError, ValueError, KeyError):
            pass
        return "Prometheus did not say why"

    def end_silence(self, name):
        if name not in self.silent_since:
            return
        first, last, reason = self.silent_since.pop(name)
        self.silent_stretches.append({"hostname": name, "from_s": round(first, 1), "to_s": round(last, 1),
                                      "reason": reason})
        log(f"{name} not answering from {first:.1f} s to {last:.1f} s: {reason}")

    def fault_free_silences(self, fault_free):
        """Hosts without a fault that the fleet showed as not answering for longer than one scrape.

        Prometheus marks a target down on one failed scrape. With a scrape timeout of one interval (1 s in the
        quick run) on a loaded machine, a healthy agent can miss one scrape: it shows down until the next scrape,
        for at most one interval (plus the time a `fleet` answer takes). What must never happen is a healthy agent
        shown down for longer, across two scrapes or more. Every stretch, short ones too, is in the report."""
        scrape = parse_seconds(self.args.scrape_interval)
        return sorted({s["hostname"] for s in self.silent_stretches
                       if s["hostname"] in fault_free and s["to_s"] - s["from_s"] > 1.5 * scrape})

    # -- swaps ---------------------------------------------------------------------------------------
    def stage_swaps(self):
        stops = []
        for swap in self.swaps:
            for host in (swap["suspect_host"], swap["partner_host"]):
                host.restarting_since = time.time()
                stops.append(host)
        for host in stops:
            Processes.stop(host.proc)
        for swap in self.swaps:
            suspect, partner = swap["suspect_host"], swap["partner_host"]
            sg, pg = swap["suspect_gpu"], swap["partner_gpu"]
            suspect.cards[sg], partner.cards[pg] = partner.cards[pg], suspect.cards[sg]
            suspect.faults = [f for f in suspect.faults if f.swap is None]
            partner.faults = [f for f in partner.faults if f.swap is None]
            start = self.t_post_errors
            if swap["blame"] == "card":  # the errors follow the card to the partner's slot
                fault = Fault(swap["kind"], pg, start, stop=None, swap="card-moved")
                partner.faults.append(fault)
                record = self.record_fault(partner, fault, "staged swap (card): the bad card in its new slot")
            else:  # the errors stay in the slot, now with the partner's good card
                fault = Fault(swap["kind"], sg, start, stop=None, swap="slot-stays")
                suspect.faults.append(fault)
                record = self.record_fault(suspect, fault, "staged swap (slot): the good card in the bad slot")
                record["serial"] = suspect.cards[sg].serial
            swap["after_record"] = record
        for host in stops:
            host.generation += 1
            self.start_agent(host)
        log(f"swapped {len(self.swaps)} pairs of cards; agents restarted")

    def attribution(self, label):
        range_s = int(time.time() - self.epoch) + 60
        body, elapsed, _ = self.fleet("attribution", extra=("--range", f"{range_s}s",
                                                            "--clean-for", self.args.clean_for))
        self.attribution_checkpoints.append({"label": label, "at_s": round(time.time() - self.epoch, 1),
                                             "seconds": round(elapsed, 3), "verdicts": body.get("verdicts", [])})
        return body.get("verdicts", [])

    @staticmethod
    def verdicts_about(verdicts, swap):
        suspect, partner = swap["suspect_host"].name, swap["partner_host"].name
        serials = {swap["suspect_serial"], swap["partner_serial"]}
        slots = {(suspect, PCI_BUS_IDS[swap["suspect_gpu"]]), (partner, PCI_BUS_IDS[swap["partner_gpu"]])}
        return [v for v in verdicts if v.get("serial") in serials or
                ((v.get("slot") or {}).get("hostname"), (v.get("slot") or {}).get("pci_bus_id")) in slots]

    def judge_swap(self, swap, verdicts):
        about = self.verdicts_about(verdicts, swap)
        suspect_slot = (swap["suspect_host"].name, PCI_BUS_IDS[swap["suspect_gpu"]])
        if swap["blame"] == "card":
            right = [v for v in about if v["blame"] == "card" and v["serial"] == swap["suspect_serial"]]
            wrong = [v for v in about if v["blame"] == "slot" or
                     (v["blame"] == "card" and v["serial"] != swap["suspect_serial"])]
        else:
            right = [v for v in about if v["blame"] == "slot" and
                     (v["slot"]["hostname"], v["slot"]["pci_bus_id"]) == suspect_slot]
            wrong = [v for v in about if v["blame"] == "card" or
                     (v["blame"] == "slot" and (v["slot"]["hostname"], v["slot"]["pci_bus_id"]) != suspect_slot)]
        return bool(right) and not wrong, about

    # -- measurements --------------------------------------------------------------------------------
    def usage_snapshot(self):
        return {h.name: host_usage(h.proc.pid) for h in self.hosts if h.proc and h.proc.poll() is None}

    def measure_scrape(self):
        host = next((h for h in self.hosts if h.role == "control"), self.hosts[0])
        url = f"http://127.0.0.1:{host.port}/metrics"
        _, plain, _ = http_get(url)
        _, packed, headers = http_get(url, headers={"Accept-Encoding": "gzip"})
        compressed = len(packed) if headers.get("Content-Encoding", "").lower() == "gzip" else None
        lines = [l for l in plain.decode("utf-8", "replace").splitlines() if l and not l.startswith("#")]
        gpu_lines = [l for l in lines if 'gpu="' in l.split("}")[0]]
        body_sizes = self.query('avg(scrape_body_size_bytes{job="gpudoctor"})')
        samples = self.query('avg(scrape_samples_scraped{job="gpudoctor"})')
        _, tsdb, _ = http_get(self.prom_url + "/api/v1/status/tsdb")
        head = json.loads(tsdb).get("data", {}).get("headStats", {}).get("numSeries")
        return {"host": host.name, "metrics_bytes": len(plain), "metrics_gzip_bytes": compressed,
                "gzip_of_body_bytes": len(gzip.compress(plain)),
                "series_per_host": len(lines), "series_per_gpu": round(len(lines) / GPUS_PER_HOST, 1),
                "gpu_labelled_series_per_gpu": round(len(gpu_lines) / GPUS_PER_HOST, 1),
                "host_level_series": len(lines) - len(gpu_lines),
                "prometheus_avg_scrape_body_bytes": float(body_sizes[0]["value"][1]) if body_sizes else None,
                "prometheus_avg_samples_scraped": float(samples[0]["value"][1]) if samples else None,
                "prometheus_head_series": head}

    def measure_answer_times(self, repeats):
        up_url = f"{self.prom_url}/api/v1/query?query=up"
        fleet_s, up_s = [], []
        for _ in range(repeats):  # interleaved, so both see the same machine
            started = time.monotonic()
            http_get(up_url)
            up_s.append(time.monotonic() - started)
            _, elapsed, _ = self.fleet()
            fleet_s.append(elapsed)
        started = time.monotonic()
        subprocess.run([self.gpudoctor, "--version"], capture_output=True, timeout=30)
        start_up = time.monotonic() - started
        range_s = int(time.time() - self.epoch) + 60
        _, offenders_s, _ = self.fleet("offenders", extra=("--range", f"{range_s}s"))
        _, attribution_s, _ = self.fleet("attribution", extra=("--range", f"{range_s}s"))
        med_f, med_u = statistics.median(fleet_s), statistics.median(up_s)
        return {"repeats": repeats, "fleet_median_s": round(med_f, 4), "fleet_p95_s": round(percentile(fleet_s, 0.95), 4),
                "up_query_median_s": round(med_u, 5), "up_query_p95_s": round(percentile(up_s, 0.95), 5),
                "ratio_median": round(med_f / med_u, 1) if med_u > 0 else None,
                "gpudoctor_version_process_s": round(start_up, 4),
                "offenders_s": round(offenders_s, 3), "attribution_s": round(attribution_s, 3),
                "range_s": range_s}

    # -- the whole run -------------------------------------------------------------------------------
    def run(self):
        a = self.args
        self.plan()
        log(f"{len(self.hosts)} hosts, {len(self.faults)} faults ({len(self.swaps)} staged swaps); first injection "
            f"at {self.t_inject:.0f} s, swap at {self.t_swap:.0f} s, end at {self.t_end:.0f} s")
        self.start()
        usage_start = self.usage_snapshot()
        usage_start_at = time.time()
        prom_cpu_start = proc_cpu_seconds(self.prometheus.pid)
        # Attribution before the swap (expected: undetermined, with a proposed swap), and once the move
        # shows in Prometheus's history but before the errors resume (expected: a swap under way).
        checkpoints = {"pre-swap": self.t_swap - 3, "swap-pending": self.t_post_errors - 3}
        swapped = False
        while True:
            now = time.time() - self.epoch
            if now >= self.t_end:
                break
            if self.swaps and not swapped and now >= checkpoints["pre-swap"]:
                self.attribution("before the swap")
                while time.time() - self.epoch < self.t_swap:
                    time.sleep(0.2)
                self.stage_swaps()
                swapped = True
            if swapped and "swap-pending" in checkpoints and now >= checkpoints["swap-pending"]:
                self.attribution("just after the swap")
                del checkpoints["swap-pending"]
            self.check_alive()
            started = time.time()
            self.poll()
            time.sleep(max(0.0, a.poll - (time.time() - started)))
        # Last word on every fault: a final poll, then the views.
        self.poll()
        usage_end = self.usage_snapshot()
        window = time.time() - usage_start_at
        prom_cpu = proc_cpu_seconds(self.prometheus.pid) - prom_cpu_start
        verdicts = self.attribution("final")
        range_s = int(time.time() - self.epoch) + 60
        offenders, _, _ = self.fleet("offenders", extra=("--range", f"{range_s}s", "--top", str(len(self.faults) + 20),
                                                         "--clean-for", a.clean_for))
        for record in self.faults:
            record["in_offenders"] = any(  # a lost GPU is exported without its PCI address: by index
                g.get("hostname") == record["hostname"] and (g.get("pci_bus_id") == record["pci_bus_id"] or
                                                             (not g.get("pci_bus_id") and g.get("gpu") == str(record["gpu"])))
                for g in offenders.get("gpus", []))
        for swap in self.swaps:
            swap["right"], swap["verdicts"] = self.judge_swap(swap, verdicts)
            card, _, _ = self.fleet("gpu", swap["suspect_serial"], ok=(0, 1, 2, 66),
                                    extra=("--range", f"{range_s}s", "--clean-for", a.clean_for))
            swap["suspect_card_history"] = card
            for cp in self.attribution_checkpoints[:-1]:
                swap.setdefault("checkpoints", []).append(
                    {"label": cp["label"], "verdicts": self.verdicts_about(cp["verdicts"], swap)})
        scrape = self.measure_scrape()
        timings = self.measure_answer_times(a.repeats)
        resources = self.resources(usage_start, usage_end, window, prom_cpu)
        return self.report(offenders, scrape, timings, resources)

    def resources(self, start, end, window, prom_cpu):
        steady = [h.name for h in self.hosts if h.generation == 0 and h.name in start and h.name in end]
        cpu_total = [end[n]["cpu_s"] for n in steady]
        cpu_window = [end[n]["cpu_s"] - start[n]["cpu_s"] for n in steady]
        rss_peak = [(end[n]["agent_hwm_kib"] + end[n]["probe_hwm_kib"]) / 1024 for n in steady]
        agent_peak = [end[n]["agent_hwm_kib"] / 1024 for n in steady]
        probe_peak = [end[n]["probe_hwm_kib"] / 1024 for n in steady]
        lifetime = time.time() - self.epoch
        return {
            "hosts_measured": len(steady), "window_s": round(window, 1), "lifetime_s": round(lifetime, 1),
            "cpu_total_s_median": round(statistics.median(cpu_total), 3), "cpu_total_s_max": round(max(cpu_total), 3),
            "cpu_percent_of_core_median": round(100 * statistics.median(cpu_window) / window, 3),
            "cpu_percent_of_core_max": round(100 * max(cpu_window) / window, 3),
            "cpu_all_agents_percent_of_core": round(100 * sum(cpu_window) / window, 1),
            "rss_peak_mib_median": round(statistics.median(rss_peak), 1), "rss_peak_mib_max": round(max(rss_peak), 1),
            "agent_rss_peak_mib_median": round(statistics.median(agent_peak), 1),
            "probe_rss_peak_mib_median": round(statistics.median(probe_peak), 1),
            "prometheus_rss_mib": round(proc_status_kib(self.prometheus.pid, "VmRSS") / 1024, 1),
            "prometheus_rss_peak_mib": round(proc_status_kib(self.prometheus.pid, "VmHWM") / 1024, 1),
            "prometheus_cpu_percent_of_core": round(100 * prom_cpu / window, 1),
            "load_average": os.getloadavg(), "cpus": os.cpu_count(),
        }

    def report(self, offenders, scrape, timings, resources):
        a = self.args
        kinds = {}
        for record in self.faults:
            k = kinds.setdefault(record["kind"], {"injected": 0, "detected": 0, "times": [], "in_offenders": 0})
            k["injected"] += 1
            k["detected"] += record["detected"]
            k["in_offenders"] += bool(record["in_offenders"])
            if record["time_to_detect_s"] is not None:
                k["times"].append(record["time_to_detect_s"])
        fault_free = [h.name for h in self.hosts if h.fault_from_s == math.inf]
        gpu_false_positives = {h: sorted(v) for h, v in self.false_positives.items()}
        swaps = [{"blame": s["blame"], "kind": s["kind"], "suspect": {"hostname": s["suspect_host"].name,
                  "gpu": s["suspect_gpu"], "pci_bus_id": PCI_BUS_IDS[s["suspect_gpu"]], "serial": s["suspect_serial"]},
                  "partner": {"hostname": s["partner_host"].name, "gpu": s["partner_gpu"],
                              "pci_bus_id": PCI_BUS_IDS[s["partner_gpu"]], "serial": s["partner_serial"]},
                  "right": s["right"], "verdicts": s["verdicts"], "checkpoints": s.get("checkpoints", []),
                  "suspect_card_history": s["suspect_card_history"]} for s in self.swaps]
        missed = [r for r in self.faults if not r["detected"]]
        for name in list(self.silent_since):
            self.end_silence(name)
        silent = self.fault_free_silences(fault_free)
        passed = {"every_fault_detected": not missed,
                  "no_false_positive": not gpu_false_positives and not silent,
                  "attribution_right_on_every_swap": all(s["right"] for s in swaps)}
        result = {
            "config": {"hosts": a.hosts, "gpus_per_host": GPUS_PER_HOST, "interval": a.interval,
                       "scrape_interval": a.scrape_interval, "seed": a.seed, "quick": a.quick,
                       "lead_s": a.lead, "error_window_s": a.error_window, "drain_s": a.drain,
                       "clean_for": a.clean_for, "poll_s": a.poll, "duration_s": self.t_end,
                       "ready_after_s": round(self.ready_at, 1), "machine_cpus": os.cpu_count()},
            "mix": {"draws": self.mix_draws, "not_injected": self.not_injected},
            "faults": [{k: v for k, v in r.items() if not k.startswith("_")} for r in self.faults],
            "by_kind": {k: {"injected": v["injected"], "detected": v["detected"], "in_offenders": v["in_offenders"],
                            "time_to_detect_median_s": statistics.median(v["times"]) if v["times"] else None,
                            "time_to_detect_max_s": max(v["times"]) if v["times"] else None}
                        for k, v in sorted(kinds.items())},
            "false_positives": {"fault_free_hosts": len(fault_free), "gpu": gpu_false_positives,
                                "machine_findings": {k: len(v) for k, v in self.machine_findings.items()},
                                "not_answering_polls": self.not_answering,
                                "not_answering_stretches": self.silent_stretches,
                                "fault_free_hosts_not_answering": silent,
                                "unexpected_on_faulty_hosts": {h: sorted(v) for h, v in self.unexpected_on_faulty.items()}},
            "swaps": swaps,
            "attribution_checkpoints": self.attribution_checkpoints,
            "offenders": offenders,
            "polls": {"count": self.polls, "median_s": round(statistics.median(self.poll_seconds), 3) if self.poll_seconds else None},
            "timings": timings, "scrape": scrape, "resources": resources, "pass": passed,
        }
        return result


def markdown(result):
    out = []
    c = result["config"]
    out.append(f"## Fleet simulation: {c['hosts']} hosts x {c['gpus_per_host']} GPUs, agent interval {c['interval']}, "
               f"scrape {c['scrape_interval']}, seed {c['seed']}{', quick' if c['quick'] else ''}\n")
    out.append("| fault type | component | injected | detected | time to detect median / max (s) | in offenders |")
    out.append("|---|---|---|---|---|---|")
    for kind, k in result["by_kind"].items():
        times = "-" if k["time_to_detect_median_s"] is None else \
            f"{k['time_to_detect_median_s']:.1f} / {k['time_to_detect_max_s']:.1f}"
        out.append(f"| {kind} | {FAULT_KINDS[kind]['component']} | {k['injected']} | {k['detected']} | {times} | "
                   f"{k['in_offenders']} |")
    if result["mix"]["not_injected"]:
        for why, n in sorted(result["mix"]["not_injected"].items()):
            out.append(f"| (not injected) | {why} | {n} | - | - | - |")
    fp = result["false_positives"]
    out.append("")
    out.append(f"False positives: {len(fp['gpu'])} of {fp['fault_free_hosts']} fault-free hosts flagged with a GPU "
               f"finding{': ' + json.dumps(fp['gpu']) if fp['gpu'] else ''}.")
    if fp["machine_findings"]:
        out.append(f"Findings about the shared real machine (not counted): "
                   + ", ".join(f"{k} on {v} hosts" for k, v in sorted(fp["machine_findings"].items())) + ".")
    if fp["not_answering_polls"]:
        out.append(f"Hosts not answering outside staged restarts (polls): {json.dumps(fp['not_answering_polls'])}.")
        for stretch in fp.get("not_answering_stretches", []):
            out.append(f"- {stretch['hostname']} from {stretch['from_s']} s to {stretch['to_s']} s: {stretch['reason']}")
    if fp["unexpected_on_faulty_hosts"]:
        out.append(f"Findings on GPUs of faulty hosts other than the faulted GPU: "
                   f"{json.dumps(fp['unexpected_on_faulty_hosts'])}.")
    if result["swaps"]:
        out.append("")
        out.append("| staged swap | suspect (host gpu serial) | partner | verdicts about them | right |")
        out.append("|---|---|---|---|---|")
        for s in result["swaps"]:
            verdicts = "; ".join(f"{v['blame']} {v['serial']} @ {v['slot']['hostname']} {v['slot']['pci_bus_id']} "
                                 f"({v['confidence']:.2f})" for v in s["verdicts"]) or "none"
            out.append(f"| bad {s['blame']} ({s['kind']}) | {s['suspect']['hostname']} {s['suspect']['gpu']} "
                       f"{s['suspect']['serial']} | {s['partner']['hostname']} {s['partner']['gpu']} "
                       f"{s['partner']['serial']} | {verdicts} | {'yes' if s['right'] else 'NO'} |")
    t, s, r = result["timings"], result["scrape"], result["resources"]
    out.append("")
    out.append("| measure | value |")
    out.append("|---|---|")
    out.append(f"| `gpudoctor fleet --json` answer, median / p95 of {t['repeats']} | {t['fleet_median_s'] * 1000:.1f} / "
               f"{t['fleet_p95_s'] * 1000:.1f} ms |")
    out.append(f"| baseline: Prometheus answering `up`, median / p95 | {t['up_query_median_s'] * 1000:.2f} / "
               f"{t['up_query_p95_s'] * 1000:.2f} ms |")
    out.append(f"| ratio (median fleet / median up) | {t['ratio_median']}x |")
    out.append(f"| `gpudoctor --version` process alone | {t['gpudoctor_version_process_s'] * 1000:.1f} ms |")
    out.append(f"| `fleet offenders` / `fleet attribution` over {t['range_s']} s | {t['offenders_s'] * 1000:.0f} / "
               f"{t['attribution_s'] * 1000:.0f} ms |")
    out.append(f"| agent + probe CPU per host, whole run ({r['lifetime_s']:.0f} s) median / max | "
               f"{r['cpu_total_s_median']:.2f} / {r['cpu_total_s_max']:.2f} s |")
    out.append(f"| agent + probe CPU per host, steady window ({r['window_s']:.0f} s) median / max | "
               f"{r['cpu_percent_of_core_median']:.2f} / {r['cpu_percent_of_core_max']:.2f} % of a core |")
    out.append(f"| all agents together | {r['cpu_all_agents_percent_of_core']:.1f} % of a core |")
    out.append(f"| peak RSS per host (agent + probe) median / max | {r['rss_peak_mib_median']:.1f} / "
               f"{r['rss_peak_mib_max']:.1f} MiB (agent {r['agent_rss_peak_mib_median']:.1f}, "
               f"probe {r['probe_rss_peak_mib_median']:.1f}) |")
    out.append(f"| Prometheus RSS now / peak | {r['prometheus_rss_mib']:.0f} / {r['prometheus_rss_peak_mib']:.0f} MiB |")
    out.append(f"| Prometheus CPU | {r['prometheus_cpu_percent_of_core']:.1f} % of a core |")
    out.append(f"| Prometheus head series | {s['prometheus_head_series']:.0f} |")
    gz = f", {s['metrics_gzip_bytes']} gzip" if s["metrics_gzip_bytes"] else f" (agent sends no gzip; gzip would be {s['gzip_of_body_bytes']})"
    out.append(f"| scrape bytes per host (one /metrics body) | {s['metrics_bytes']}{gz} |")
    out.append(f"| series per host / per GPU | {s['series_per_host']} / {s['series_per_gpu']} "
               f"({s['gpu_labelled_series_per_gpu']} GPU-labelled per GPU + {s['host_level_series']} per host) |")
    out.append(f"| load average (1, 5, 15 min) on {r['cpus']} CPUs | {', '.join(f'{x:.2f}' for x in r['load_average'])} |")
    p = result["pass"]
    out.append("")
    out.append("Criteria: " + ", ".join(f"{k}: {'yes' if v else 'NO'}" for k, v in p.items()))
    return "\n".join(out)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter, epilog=__doc__)
    here = os.path.dirname(os.path.abspath(__file__))
    parser.add_argument("--gpudoctor", default=os.environ.get("GPUDOCTOR_BIN", "build/bin/gpudoctor"))
    parser.add_argument("--source-dir", default=os.path.join(here, ".."))
    parser.add_argument("--prometheus", default=shutil.which("prometheus"), help="the prometheus binary")
    parser.add_argument("--hosts", type=int, default=None, help="simulated hosts (default 200; --quick 10)")
    parser.add_argument("--faults", type=int, default=None,
                        help="draws from the failure mix (default hosts/8); non-GPU draws are counted, not injected")
    parser.add_argument("--swaps", type=int, default=2, help="staged swaps, alternately a bad card and a bad slot")
    parser.add_argument("--duration", type=parse_seconds, default=None,
                        help="how long the fleet runs before the final measurements (default 420s; --quick 135s)")
    parser.add_argument("--interval", default=None, help="agents' --interval (default 5s; --quick 1s)")
    parser.add_argument("--scrape-interval", default=None, help="Prometheus scrape interval (default: --interval)")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--quick", action="store_true",
                        help="10 hosts, 1 fault of each kind, 2 staged swaps (a bad card and a bad slot), ~3 minutes")
    parser.add_argument("--lead", type=parse_seconds, default=None,
                        help="first injection, after start (default 20s quick, else 40s + 0.25s per host)")
    parser.add_argument("--inject-spread", type=parse_seconds, default=None, help="injections spread over this")
    parser.add_argument("--error-window", type=parse_seconds, default=None,
                        help="how long swap suspects err before their host is drained (default 25s; 60s)")
    parser.add_argument("--drain", type=parse_seconds, default=None,
                        help="quiet time between a suspect's last error and the swap: more than two history "
                             "steps (default 35s; 60s)")
    parser.add_argument("--post-swap-delay", type=parse_seconds, default=30,
                        help="errors resume this long after the swap (long enough for the move to show)")
    parser.add_argument("--observe", type=parse_seconds, default=None, help="run on after the swap (default 60s; 90s)")
    parser.add_argument("--clean-for", default="60s", help="passed to fleet attribution")
    parser.add_argument("--poll", type=parse_seconds, default=None, help="fleet polling period (default 1s; 2s)")
    parser.add_argument("--repeats", type=int, default=None, help="fleet answer-time repeats (default 10; 30)")
    parser.add_argument("--json-out", help="write the full result as JSON here")
    parser.add_argument("--keep", action="store_true", help="keep the work folder (scenarios, logs, TSDB)")
    parser.add_argument("--no-copy", action="store_true",
                        help="run the binary where it is (default: a copy in the work folder, safe from rebuilds)")
    args = parser.parse_args()

    q = args.quick
    args.hosts = args.hosts or (10 if q else 200)
    args.faults = args.faults if args.faults is not None else max(1, args.hosts // 8)
    args.interval = args.interval or ("1s" if q else "5s")
    args.scrape_interval = args.scrape_interval or args.interval
    args.lead = args.lead if args.lead is not None else (15 if q else 40 + 0.25 * args.hosts)
    args.inject_spread = args.inject_spread if args.inject_spread is not None else (10 if q else 30)
    args.error_window = args.error_window if args.error_window is not None else (25 if q else 60)
    args.drain = args.drain if args.drain is not None else (35 if q else 60)
    args.observe = args.observe if args.observe is not None else (60 if q else 90)
    args.duration = args.duration if args.duration is not None else (135 if q else 420)
    args.poll = args.poll if args.poll is not None else (1 if q else 2)
    args.repeats = args.repeats or (10 if q else 30)
    if args.swaps and args.error_window < parse_seconds(args.scrape_interval) * 4:
        parser.error("--error-window must cover a few scrapes")

    if not args.prometheus:
        print("SKIPPED: needs the prometheus binary (apt-get install prometheus)")
        return SKIP
    if not os.access(args.gpudoctor, os.X_OK):
        print(f"fleet_sim: {args.gpudoctor} is not an executable", file=sys.stderr)
        return 2
    help_text = subprocess.run([args.gpudoctor, "fleet", "--help"], capture_output=True, text=True, timeout=30)
    if help_text.returncode != 0 or "attribution" not in help_text.stdout:
        print(f"fleet_sim: {args.gpudoctor} has no `fleet` command", file=sys.stderr)
        return 2

    workdir = tempfile.mkdtemp(prefix="gpudoctor-fleet-sim-")
    if not args.no_copy:
        # A copy of the binary, its probe and its modules: a rebuild during the run cannot change them.
        source_bin = os.path.dirname(os.path.abspath(args.gpudoctor))
        copy_bin = os.path.join(workdir, "bin")
        os.makedirs(copy_bin)
        for name in os.listdir(source_bin):
            if name in ("gpudoctor", "gpudoctor-probe") or (name.startswith("libgpudoctor_") and name.endswith(".so")):
                shutil.copy2(os.path.join(source_bin, name), copy_bin)
        args.gpudoctor = os.path.join(copy_bin, os.path.basename(args.gpudoctor))
        if subprocess.run([args.gpudoctor, "--version"], capture_output=True, timeout=30).returncode != 0:
            print(f"fleet_sim: the copy of {source_bin}/gpudoctor does not run (a rebuild under way?)", file=sys.stderr)
            shutil.rmtree(workdir, ignore_errors=True)
            return 2
    sim = FleetSim(args, workdir)

    def stop(signum, _frame):
        raise KeyboardInterrupt(f"signal {signum}")
    signal.signal(signal.SIGTERM, stop)
    status = 2
    try:
        result = sim.run()
        if args.json_out:
            with open(args.json_out, "w") as f:
                json.dump(result, f, indent=2, default=str)
        print(markdown(result))
        status = 0 if all(result["pass"].values()) else 1
    except (RunFailure, KeyboardInterrupt, subprocess.TimeoutExpired, OSError) as error:
        print(f"fleet_sim: {error}", file=sys.stderr)
        for proc in sim.processes.procs[-3:]:
            print(f"(log: {proc.log_path})", file=sys.stderr)
        args.keep = True
    finally:
        sim.processes.close()
        if args.keep:
            print(f"fleet_sim: work folder kept: {workdir}", file=sys.stderr)
        else:
            shutil.rmtree(workdir, ignore_errors=True)
    return status


if __name__ == "__main__":
    sys.exit(main())
