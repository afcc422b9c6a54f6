#!/usr/bin/env python3
"""The fleet page of `gpudoctor fleet --listen`, loaded in headless Chromium.

Starts two agents on simulated servers (one healthy, one with a GPU fallen off
the bus), lists them with a third address where nothing answers, serves the
fleet view with `gpudoctor fleet --agents FILE --listen 127.0.0.1:0`, and
checks what a person would see: every host in the checklist, the silent one
first, the critical one next with its finding in the right column, and an item
the healthy host could not check shown as not checked, never as passed. Also
checks the JSON API and that the page loads nothing from another origin.
Exit 77 (skipped) without Chromium.
"""
import argparse
import json
import os
import re
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request

CHROMIUM = "/usr/bin/chromium"


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_for(url, deadline_s=20):
    end = time.time() + deadline_s
    while time.time() < end:
        try:
            with urllib.request.urlopen(url, timeout=2) as answer:
                return answer.read()
        except OSError:
            time.sleep(0.2)
    raise SystemExit(f"FAIL: {url} did not answer within {deadline_s} s")


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--gpudoctor", required=True)
    parser.add_argument("--source-dir", required=True)
    args = parser.parse_args()
    if not os.access(CHROMIUM, os.X_OK):
        print("Chromium is not installed (apt-get install chromium): skipped")
        return 77

    work = tempfile.mkdtemp(prefix="gpudoctor-fleet-page-")
    processes = []
    try:
        examples = os.path.join(args.source_dir, "examples")
        agents = []
        for name, scenario in [("node-ok", "healthy-8xh100.toml"), ("node-bad", "gpu-fallen-off-bus.toml")]:
            port = free_port()
            processes.append(subprocess.Popen(
                [args.gpudoctor, "agent", "--simulate", os.path.join(examples, scenario), "--listen",
                 f"127.0.0.1:{port}", "--db", os.path.join(work, name + ".db"), "--log", "none", "--interval", "1s",
                 "--hostname", name], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))
            agents.append(f"http://127.0.0.1:{port}")
        for url in agents:
            wait_for(url + "/healthz")
        time.sleep(2)  # a few samples, so the findings are open
        agents_file = os.path.join(work, "agents.txt")
        silent = f"http://127.0.0.1:{free_port()}"
        with open(agents_file, "w") as f:
            f.write("# two agents and an address where nothing answers\n" + "\n".join(agents + [silent]) + "\n")

        page_port = free_port()
        processes.append(subprocess.Popen(
            [args.gpudoctor, "fleet", "--agents", agents_file, "--timeout", "2s", "--listen", f"127.0.0.1:{page_port}"],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))
        base = f"http://127.0.0.1:{page_port}"
        wait_for(base + "/")

        checklist = json.loads(wait_for(base + "/api/v1/fleet/checklist"))
        hosts = [h["hostname"] for h in checklist["hosts"]]
        assert hosts == [silent, "node-bad", "node-ok"], hosts
        assert checklist["summary"] == {"hosts": 3, "not_answering": 1, "critical": 1, "warning": 0}, checklist["summary"]
        assert checklist["exit_status"] == 2
        ok_items = {i["title"]: i for i in next(h for h in checklist["hosts"] if h["hostname"] == "node-ok")["items"]}
        assert ok_items["GPUs below their temperature limits"]["checked"] is True, ok_items
        fans = ok_items["Fans turning"]  # the simulated GPUs have no fans, and no chassis fan is read
        assert fans["checked"] is False and fans["summary"].startswith("not checked: "), fans
        assert all(i["checked"] is None for i in checklist["hosts"][0]["items"]), checklist["hosts"][0]
        offenders = json.loads(wait_for(base + "/api/v1/fleet/offenders"))
        assert offenders["with_history"] is False
        assert any(g["hostname"] == "node-bad" and "gpu_lost" in g["open_findings"] for g in offenders["gpus"]), offenders

        profile = os.path.join(work, "chromium")
        dom = subprocess.run(
            [CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
             "--disable-background-networking", "--disable-component-update", "--disable-sync",
             f"--user-data-dir={profile}", "--virtual-time-budget=5000", "--dump-dom", base + "/"],
            capture_output=True, text=True, timeout=90).stdout
        with open(os.path.join(work, "fleet-dom.html"), "w") as f:
            f.write(dom)
        assert 'data-ready="true"' in dom, "the page never finished loading:\n" + dom[:2000]
        rows = re.findall(r'<tr data-host="([^"]+)" data-worst="([^"]+)"', dom)
        assert rows == [(silent, "not_answering"), ("node-bad", "critical"), ("node-ok", "ok")], rows
        bad_row = dom[dom.index('data-host="node-bad"'):]
        bad_row = bad_row[:bad_row.index("</tr>")]
        assert "gpu_lost gpu 3" in bad_row, bad_row
        ok_row = dom[dom.index('data-host="node-ok"'):]
        ok_row = ok_row[:ok_row.index("</tr>")]
        shown = re.findall(r'<td class="cell [^"]*" data-state="([^"]+)"[^>]*>([^<]*)<', ok_row)
        expected = [("passed", "✓") if i["checked"] else ("not-checked", "—") for i in ok_items.values()]
        assert shown == expected, (shown, expected)
        silent_row = dom[dom.index(f'data-host="{silent}"'):]
        silent_row = silent_row[:silent_row.index("</tr>")]
        assert set(re.findall(r'data-state="([^"]+)"', silent_row)) == {"not-known"}, silent_row
        assert re.search(r'id="not-answering"[^>]*>1<', dom), "the summary does not count the silent host"
        for asset in ("fleet.html", "fleet.js", "style.css"):
            text = open(os.path.join(args.source_dir, "web", "dist", asset)).read()
            assert not re.search(r'(src|href)\s*=\s*["\']?(https?:)?//', text), f"{asset} loads from elsewhere"
        print("fleet page: 3 hosts shown in order, the finding in its column, not checked apart from passed, "
              "JSON views consistent")
        return 0
    finally:
        for process in processes:
            process.terminate()
        for process in processes:
            try:
                process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                process.kill()
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
