#!/usr/bin/env python3
"""Memory and time of gpudoctor's HTTP clients against hostile peers, each as a
ratio against the same command against well-behaved peers, measured in the
same run (docs/benchmarks.md, "Hostile peers").

  fleet --prometheus    a Prometheus of --hosts hosts answering correctly (the baseline), then one that
                        drips, sends endless headers, an endless body, 60 MB of '[', or a vector of
                        400,000 series
  fleet --agents        16 agents serving a real agent's /metrics (the baseline), then 16 each serving
                        56 MB of it, and 16 that never stop
  agent webhook         an agent whose webhook answers at once (the baseline), then one whose webhook
                        answers with endless headers or drips, for --seconds

Peak RSS is each process's VmHWM. With --before BINARY the hostile cases are run with that binary too
(another build, say the previous release), under a 6 GiB address-space limit so a runaway cannot take
the machine: "limit" in its column means it hit it.

    bench/hostile_peers.py --gpudoctor build/bin/gpudoctor --source-dir .
"""
import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--gpudoctor", required=True)
    parser.add_argument("--source-dir", required=True)
    parser.add_argument("--before", help="another gpudoctor to run the hostile cases with")
    parser.add_argument("--hosts", type=int, default=1000)
    parser.add_argument("--seconds", type=int, default=30, help="how long each agent runs")
    parser.add_argument("--before-timeout", type=int, default=120, help="when the --before binary is stopped")
    args = parser.parse_args()
    sys.path.insert(0, os.path.join(args.source_dir, "testing", "hostile_http"))
    import hostile_http as h

    work = tempfile.mkdtemp(prefix="gpudoctor-bench-hostile-")
    rows = []

    def measure(label, command, before_command=None, timeout_s=300):
        status, out, err, took, rss = h.run_measured(command, timeout_s)
        row = {"case": label, "exit": status, "seconds": round(took, 2), "peak_rss_mib": round(rss, 1),
               "message": err.decode(errors="replace").strip().splitlines()[-1:] or [""]}
        if args.before and before_command:
            limited = ["prlimit", f"--as={6 << 30}", "--"] + before_command
            b_status, _, b_err, b_took, b_rss = h.run_measured(limited, args.before_timeout)
            row["before"] = {"exit": b_status, "seconds": round(b_took, 2), "peak_rss_mib": round(b_rss, 1),
                             "killed_at_timeout": b_took >= args.before_timeout,
                             "hit_limit": b_took < args.before_timeout and (b_status in (-6, -9, 134, 137) or
                                                                            b"bad_alloc" in b_err)}
        rows.append(row)
        print(json.dumps(row), flush=True)
        return row

    def with_before(command):
        return [args.before] + command[1:] if args.before else None

    # ---- fleet --prometheus ------------------------------------------------------------
    now = time.time()

    def vector(series):
        return json.dumps({"status": "success", "data": {"resultType": "vector", "result": [
            {"metric": labels, "value": [now, "1"]} for labels in series]}}).encode()

    hosts = [f"gpu{i:05d}" for i in range(args.hosts)]
    up = vector([{"__name__": "up", "job": "gpudoctor", "instance": f"{host}:9847"} for host in hosts])
    samples = []
    for host in hosts:
        base = {"job": "gpudoctor", "instance": f"{host}:9847", "hostname": host}
        samples.append(dict(base, __name__="gpudoctor_up"))
        samples.append(dict(base, __name__="gpudoctor_host_info", board_serial="B" + host))
        for gpu in range(8):
            samples.append(dict(base, __name__="gpudoctor_gpu_info", gpu=str(gpu), uuid=f"GPU-{host}-{gpu}",
                                serial=f"1320{gpu}{host}", pci_bus_id=f"00000000:{gpu:02x}:00.0",
                                name="NVIDIA H100 80GB HBM3", slot=f"SXM{gpu}"))
            samples.append(dict(base, __name__="gpudoctor_gpu_accessible", gpu=str(gpu)))
    samples = vector(samples)
    known = vector([{"job": "gpudoctor", "instance": f"{host}:9847", "hostname": host,
                     "board_serial": "B" + host} for host in hosts])

    def prometheus(conn, request, stop):
        body = request["body"]
        answer = up if b"query=up" in body else known if b"last_over_time" in body else samples
        h.answer(200, answer)(conn, request, stop)

    with h.HostileServer(prometheus) as server:
        baseline = measure(f"fleet --prometheus, {args.hosts} hosts answering (baseline)",
                           [args.gpudoctor, "--json", "fleet", "--prometheus", server.url])
    big = vector([{"__name__": "gpudoctor_gpu_info", "job": "gpudoctor", "instance": f"h{i // 8}:9847",
                   "gpu": str(i % 8)} for i in range(400_000)])
    cases = [("drips a byte a second (--timeout 10s)", h.drip(up, 1.0), ["--timeout", "10s"]),
             ("endless headers", h.endless_headers(), []),
             ("endless body", h.endless_body(b"["), []),
             ("60 MB of '['", h.answer(200, b"[" * (60 << 20)), []),
             (f"400,000 series ({len(big) >> 20} MB)", h.answer(200, big), [])]
    for label, behaviour, extra in cases:
        with h.HostileServer(behaviour) as server:
            command = [args.gpudoctor, "--json", "fleet", "--prometheus", server.url] + (extra or ["--timeout", "60s"])
            measure("fleet --prometheus: " + label, command, with_before(command))
    del big

    # ---- fleet --agents ----------------------------------------------------------------
    scenario = os.path.join(args.source_dir, "examples", "healthy-8xh100.toml")
    port = h.HostileServer(h.hold()).port  # a free port, near enough
    agent = subprocess.Popen([args.gpudoctor, "agent", "--simulate", scenario, "--listen", f"127.0.0.1:{port}",
                              "--db", os.path.join(work, "a.db"), "--log", "none", "--interval", "1s"],
                             stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    metrics = b""
    for _ in range(100):
        try:
            import urllib.request
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=2) as answer:
                metrics = answer.read()
            if b"\ngpudoctor_up 1\n" in metrics:
                break
            time.sleep(0.2)
        except OSError:
            time.sleep(0.2)
    agent.terminate()
    agent.wait(10)
    repeated = (metrics * ((56 << 20) // len(metrics) + 1))[:56 << 20]

    def agents(behaviour, label):
        servers = [h.HostileServer(behaviour).__enter__() for _ in range(16)]
        try:
            path = os.path.join(work, "agents.txt")
            with open(path, "w") as f:
                f.write("\n".join(s.url for s in servers) + "\n")
            command = [args.gpudoctor, "--json", "fleet", "--agents", path, "--timeout", "60s"]
            before = with_before(command) if "baseline" not in label else None
            return measure("fleet --agents: " + label, command, before)
        finally:
            for s in servers:
                s.__exit__()

    agents(h.answer(200, metrics), f"16 agents, a real /metrics of {len(metrics) >> 10} KiB each (baseline)")
    agents(h.answer(200, repeated), "16 agents, 56 MB of /metrics each")
    agents(h.endless_body(metrics[:4096]), "16 agents whose /metrics never ends")

    # ---- the agent's webhook -----------------------------------------------------------
    critical = os.path.join(args.source_dir, "examples", "gpu-fallen-off-bus.toml")

    def webhook(behaviour, label, binary):
        with h.HostileServer(behaviour) as receiver:
            config = os.path.join(work, "agent.toml")
            with open(config, "w") as f:
                f.write(f'[alerts]\nmin_interval = "0s"\ngroup_wait = "0s"\n[[alerts.webhook]]\n'
                        f'url = "{receiver.url}/hook"\ntimeout = "5s"\nattempts = 20\nbackoff = "1s"\n'
                        'max_backoff = "1s"\n')
            command = [binary, "agent", "--simulate", critical, "--listen", "127.0.0.1:0", "--config", config,
                       "--db", os.path.join(work, label.replace(" ", "_") + ".db"), "--log", "none",
                       "--interval", "1s", "--duration", f"{args.seconds}s"]
            if binary == args.before:
                command = ["prlimit", f"--as={6 << 30}", "--"] + command
            status, out, err, took, rss = h.run_measured(command, args.seconds + 60)
            return {"exit": status, "seconds": round(took, 1), "peak_rss_mib": round(rss, 1),
                    "requests": len(receiver.requests)}

    for label, behaviour in [("answers at once (baseline)", h.answer(200, b"ok")),
                             ("answers with endless headers", h.endless_headers()),
                             ("drips its answer", h.drip(b"ok", 1.0))]:
        row = {"case": "agent webhook " + label}
        row.update(webhook(behaviour, label, args.gpudoctor))
        if args.before and "baseline" not in label:
            row["before"] = webhook(behaviour, label + " before", args.before)
        rows.append(row)
        print(json.dumps(row), flush=True)

    print("\n| case | exit | time | peak RSS | x baseline |" + (" before: peak RSS, time |" if args.before else ""))
    print("|---|---|---|---|---|" + ("---|" if args.before else ""))
    def baseline_of(prefix):
        return next(r["peak_rss_mib"] for r in rows if r["case"].startswith(prefix) and "baseline" in r["case"])

    fleet_base = baseline_of("fleet --prometheus")
    agents_base = baseline_of("fleet --agents")
    hook_base = baseline_of("agent webhook")
    for r in rows:
        base = fleet_base if "--prometheus" in r["case"] else agents_base if "--agents" in r["case"] else hook_base
        before = r.get("before")
        before_text = ""
        if args.before:
            if before and before.get("hit_limit"):
                before_text = f"over the 6 GiB limit after {before['seconds']} s |"
            elif before and before.get("killed_at_timeout"):
                before_text = f"{before['peak_rss_mib']} MiB, still running at {before['seconds']:.0f} s: stopped |"
            elif before:
                before_text = f"{before['peak_rss_mib']} MiB, {before['seconds']} s (exit {before['exit']}) |"
            else:
                before_text = " |"
        print(f"| {r['case']} | {r['exit']} | {r['seconds']} s | {r['peak_rss_mib']} MiB | "
              f"{r['peak_rss_mib'] / base:.2f} |" + before_text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
