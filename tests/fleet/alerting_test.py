#!/usr/bin/env python3
"""Fleet alerting, end to end, against the real Prometheus and Alertmanager.

Three gpudoctor agents on simulated servers (one healthy, one with warnings only,
one with critical findings), each reporting its own hostname (--hostname), are
scraped by Prometheus with the shipped rules (deploy/prometheus-rules.yml,
unchanged), which sends its alerts to Alertmanager with the shipped configuration
(deploy/alertmanager.yml, receivers pointed at a webhook in this process). The
test checks that the critical host pages exactly once, as one notification for
that host, that the other hosts do not page, and that warnings reach the warnings
receiver only.

    alerting_test.py --gpudoctor build/bin/gpudoctor [--source-dir .]

Exit status: 0 passed, 1 failed, 77 skipped (no prometheus or alertmanager
binary: `apt-get install prometheus prometheus-alertmanager`). Python's standard
library only.
"""

import argparse
import http.server
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import threading
import time

from servers import Daemons, TestFailure, find_binary, free_ports, http_get, prometheus_query, wait_until

SKIP = 77

# The three hosts: name, scenario, what it should raise. `gpudoctor check --simulate X --json`
# shows each scenario's findings.
HEALTHY = ("host-a", "healthy-8xh100.toml")
# pcie_link_degraded (warning) only. Its alerts wait `for: 10m`, so they are pending, never
# sent, during this test: the host must not page.
WARNING = ("host-b", "pcie-downtrained.toml")
# ecc_uncorrectable and xid_recent (critical) on GPU 6, which alert at once
# (GpudoctorFindingCritical has no `for`), and remapped_rows_pending, which raises
# GpuResetPending (warning, no `for`) on the raw series.
CRITICAL = ("host-c", "ecc-dbe-row-remap.toml")
HOSTS = (HEALTHY, WARNING, CRITICAL)

PAGER = "gpudoctor-pager"
WARNINGS = "gpudoctor-warnings"

NOTIFY_DEADLINE_S = 90  # for the critical host's page to arrive
QUIET_AFTER_S = 10  # then no second notification for that group
# Alertmanager's group_wait, shortened from the shipped 30s so the test takes seconds.
TEST_GROUP_WAIT = "2s"


class Webhook:
    """Records every POST: (seconds since start, path, parsed JSON body)."""

    def __init__(self, port):
        self.posts = []
        self.lock = threading.Lock()
        self.start = time.monotonic()
        webhook = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_POST(self):
                length = int(self.headers.get("Content-Length", "0"))
                body = self.rfile.read(length)
                try:
                    parsed = json.loads(body)
                except ValueError:
                    parsed = {"unparsable": body.decode("utf-8", "replace")}
                with webhook.lock:
                    webhook.posts.append((time.monotonic() - webhook.start, self.path, parsed))
                self.send_response(200)
                self.send_header("Content-Length", "0")
                self.end_headers()

            def log_message(self, *args):
                pass

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", port), Handler)
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def snapshot(self):
        with self.lock:
            return list(self.posts)

    def close(self):
        self.server.shutdown()
        self.server.server_close()


def alertmanager_config(shipped_text, webhook_port, group_wait):
    """The shipped config with two changes only: each receiver's webhook URL points at the
    test's webhook (path /RECEIVER-NAME), and every group_wait is shortened."""
    out = []
    receiver = None
    urls = 0
    for line in shipped_text.splitlines():
        name = re.match(r"^  - name:\s*(\S+)\s*$", line)
        if name:
            receiver = name.group(1)
        url = re.match(r"^(\s*-?\s*url:\s*)\S+\s*$", line)
        if url:
            if receiver is None:
                raise TestFailure("alertmanager.yml: a url before any receiver")
            line = f"{url.group(1)}http://127.0.0.1:{webhook_port}/{receiver}"
            urls += 1
        line = re.sub(r"^(\s*group_wait:\s*)\S+", lambda m: m.group(1) + group_wait, line)
        out.append(line)
    if urls != 2:
        raise TestFailure(f"alertmanager.yml: expected 2 receiver URLs to redirect, found {urls}")
    return "\n".join(out) + "\n"


def prometheus_config(rules_path, agent_ports, alertmanager_port):
    targets = ", ".join(f"'127.0.0.1:{port}'" for port in agent_ports)
    return f"""global:
  scrape_interval: 1s
  scrape_timeout: 1s
  evaluation_interval: 1s
rule_files:
  - '{rules_path}'
alerting:
  alertmanagers:
    - static_configs:
        - targets: ['127.0.0.1:{alertmanager_port}']
scrape_configs:
  - job_name: gpudoctor
    static_configs:
      - targets: [{targets}]
"""


def describe(posts):
    lines = []
    for at, path, body in posts:
        alerts = [(a.get("status"), a["labels"].get("alertname"), a["labels"].get("hostname"),
                   a["labels"].get("severity")) for a in body.get("alerts", [])]
        lines.append(f"  {at:6.1f}s {path} receiver={body.get('receiver')} status={body.get('status')} "
                     f"groupLabels={body.get('groupLabels')} alerts={alerts}")
    return "\n".join(lines) or "  (none)"


def run(args, workdir, daemons):
    source_dir = os.path.abspath(args.source_dir)
    # The daemons run in the work folder: a relative path must not depend on it.
    gpudoctor = shutil.which(args.gpudoctor) if os.sep not in args.gpudoctor else os.path.abspath(args.gpudoctor)
    if not gpudoctor or not os.access(gpudoctor, os.X_OK):
        raise TestFailure(f"no gpudoctor binary at {args.gpudoctor}")
    prometheus = find_binary("prometheus")
    alertmanager = find_binary("prometheus-alertmanager", "alertmanager")
    if not prometheus or not alertmanager:
        print("SKIPPED: needs the prometheus and alertmanager binaries "
              "(apt-get install prometheus prometheus-alertmanager)")
        return SKIP

    help_text = subprocess.run([gpudoctor, "agent", "--help"], capture_output=True, text=True,
                               timeout=30).stdout
    if "--hostname" not in help_text:
        raise TestFailure(f"{gpudoctor} agent has no --hostname option; the agents need distinct hostnames")

    webhook_port, alertmanager_port, prometheus_port, *agent_ports = free_ports(3 + len(HOSTS))
    webhook = Webhook(webhook_port)
    try:
        for (hostname, scenario), port in zip(HOSTS, agent_ports):
            daemons.start(f"agent-{hostname}", [
                gpudoctor, "agent", "--simulate", os.path.join(source_dir, "examples", scenario),
                "--hostname", hostname, "--listen", f"127.0.0.1:{port}",
                "--db", os.path.join(workdir, f"{hostname}.db"), "--log", "none", "--interval", "1s"])

        with open(os.path.join(source_dir, "deploy", "alertmanager.yml")) as f:
            am_text = alertmanager_config(f.read(), webhook_port, TEST_GROUP_WAIT)
        am_config = os.path.join(workdir, "alertmanager.yml")
        with open(am_config, "w") as f:
            f.write(am_text)
        daemons.start("alertmanager", [
            alertmanager, f"--config.file={am_config}", f"--storage.path={os.path.join(workdir, 'am-data')}",
            f"--web.listen-address=127.0.0.1:{alertmanager_port}", "--cluster.listen-address="])

        prom_config = os.path.join(workdir, "prometheus.yml")
        with open(prom_config, "w") as f:
            f.write(prometheus_config(os.path.join(source_dir, "deploy", "prometheus-rules.yml"), agent_ports,
                                      alertmanager_port))
        daemons.start("prometheus", [
            prometheus, f"--config.file={prom_config}",
            f"--storage.tsdb.path={os.path.join(workdir, 'prom-data')}",
            f"--web.listen-address=127.0.0.1:{prometheus_port}"])

        def ready(url):
            daemons.check_alive()
            return http_get(url, timeout=2)[0] == 200

        for port in agent_ports:
            wait_until(f"the agent on port {port}", lambda: ready(f"http://127.0.0.1:{port}/healthz"), 30)
        wait_until("alertmanager", lambda: ready(f"http://127.0.0.1:{alertmanager_port}/-/ready"), 30)
        wait_until("prometheus", lambda: ready(f"http://127.0.0.1:{prometheus_port}/-/ready"), 30)
        print(f"daemons ready after {time.monotonic() - webhook.start:.1f}s")

        # Every host is scraped under its own hostname, and the rules name the host behind each target.
        def all_scraped():
            daemons.check_alive()
            hosts = {r["metric"].get("hostname") for r in prometheus_query(prometheus_port, "instance:gpudoctor:hostname")}
            return hosts == {h for h, _ in HOSTS}
        wait_until("Prometheus to see the three hostnames", all_scraped, 60)

        # The critical host's page.
        def pages_for(hostname, posts):
            return [p for p in posts if p[2].get("receiver") == PAGER and
                    p[2].get("groupLabels", {}).get("hostname") == hostname]

        def paged(hostname, posts):  # in whatever group: the grouping is checked below
            return [p for p in posts if p[2].get("receiver") == PAGER and
                    any(a.get("labels", {}).get("hostname") == hostname for a in p[2].get("alerts", []))]

        critical_host = CRITICAL[0]
        deadline = webhook.start + NOTIFY_DEADLINE_S
        while not paged(critical_host, webhook.snapshot()):
            daemons.check_alive()
            if time.monotonic() > deadline:
                raise TestFailure(f"no page for {critical_host} within {NOTIFY_DEADLINE_S}s; notifications:\n" +
                                  describe(webhook.snapshot()))
            time.sleep(0.25)
        first_at = paged(critical_host, webhook.snapshot())[0][0]
        print(f"{critical_host} paged after {first_at:.1f}s")

        # Warnings that fire at once on this host (GpuResetPending) reach the warnings receiver.
        def warned():
            return any(p[2].get("receiver") == WARNINGS and
                       any(a.get("labels", {}).get("hostname") == critical_host for a in p[2].get("alerts", []))
                       for p in webhook.snapshot())
        wait_until(f"{critical_host}'s warnings at the warnings receiver", warned, 30)

        # The warning-only host's findings are seen by the rules: pending, not yet sent.
        def warning_host_pending():
            result = prometheus_query(
                prometheus_port, f'ALERTS{{alertstate="pending", hostname="{WARNING[0]}", severity="warning"}}')
            return len(result) > 0
        wait_until(f"{WARNING[0]}'s warning alerts to be pending in Prometheus", warning_host_pending, 30)

        time.sleep(QUIET_AFTER_S)
        daemons.check_alive()
        posts = webhook.snapshot()
        print("notifications:\n" + describe(posts))

        failures = []
        pages = pages_for(critical_host, posts)
        if len(pages) != 1 or len(paged(critical_host, posts)) != 1:
            raise TestFailure(f"{len(paged(critical_host, posts))} pages with {critical_host}'s alerts, "
                              f"{len(pages)} of them grouped by its hostname; expected exactly 1 of each\n"
                              "notifications:\n" + describe(posts))
        page = pages[0][2]
        if page.get("groupLabels") != {"hostname": critical_host}:
            failures.append(f"the page is grouped by {page.get('groupLabels')}, expected by hostname alone")
        if page.get("status") != "firing":
            failures.append(f"the page's status is {page.get('status')}")
        alerts = page.get("alerts", [])
        if not alerts:
            failures.append("the page carries no alert")
        for alert in alerts:
            labels = alert.get("labels", {})
            if labels.get("hostname") != critical_host:
                failures.append(f"an alert in {critical_host}'s page names hostname {labels.get('hostname')}: {labels}")
            if labels.get("severity") != "critical":
                failures.append(f"a non-critical alert was paged: {labels}")
        findings = {a["labels"].get("id") for a in alerts if a["labels"].get("alertname") == "GpudoctorFindingCritical"}
        if not {"ecc_uncorrectable", "xid_recent"} <= findings:
            failures.append(f"the page lacks the critical findings: it has {sorted(f for f in findings if f)}")

        for at, path, body in posts:
            receiver = body.get("receiver")
            if path != "/" + str(receiver):
                failures.append(f"notification for {receiver} arrived at {path}")
            hostname = body.get("groupLabels", {}).get("hostname")
            severities = {a.get("labels", {}).get("severity") for a in body.get("alerts", [])}
            if receiver == PAGER and hostname != critical_host:
                failures.append(f"a page for {hostname!r} at {at:.1f}s, which has no critical finding")
            if receiver == WARNINGS and severities != {"warning"}:
                failures.append(f"the warnings receiver got severities {sorted(map(str, severities))} at {at:.1f}s")
            if receiver not in (PAGER, WARNINGS):
                failures.append(f"a notification for unknown receiver {receiver!r}")
            for alert in body.get("alerts", []):
                if alert.get("labels", {}).get("hostname") != hostname:
                    failures.append(f"alert {alert.get('labels')} in the group of {hostname!r}")
        if failures:
            raise TestFailure("\n".join(failures) + "\nnotifications:\n" + describe(posts))
        print(f"PASSED in {time.monotonic() - webhook.start:.1f}s")
        return 0
    finally:
        webhook.close()


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--gpudoctor", default=os.environ.get("GPUDOCTOR_BIN", "build/bin/gpudoctor"))
    parser.add_argument("--source-dir", default=os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
    parser.add_argument("--keep", action="store_true", help="keep the work folder (logs, configs)")
    args = parser.parse_args()

    workdir = tempfile.mkdtemp(prefix="gpudoctor-alerting-")
    daemons = Daemons(workdir)
    status = 1
    try:
        status = run(args, workdir, daemons)
    except TestFailure as failure:
        print(f"FAILED: {failure}", file=sys.stderr)
    except Exception:  # an unexpected error is a failure too, with the daemons' logs
        import traceback
        traceback.print_exc()
    finally:
        daemons.close()
        if status not in (0, SKIP):
            daemons.print_logs()
        if args.keep or status not in (0, SKIP):
            print(f"work folder kept: {workdir}", file=sys.stderr)
        else:
            shutil.rmtree(workdir, ignore_errors=True)
    return status


if __name__ == "__main__":
    sys.exit(main())
