#!/usr/bin/env python3
"""`gpudoctor fleet` and its page against peers that misbehave, on loopback.

Every server here is hostile in one way (testing/hostile_http/hostile_http.py):
it drips its answer a byte a second, sends headers or a body for ever, answers
60 MB of '[', labels its hosts with bytes that are not UTF-8 or with terminal
escapes, or checks the credentials it was sent. Whatever they do, gpudoctor
must end by its deadline, stay within its memory bound, keep every other host,
print valid JSON and no escape sequence, and never show a password.
"""
import argparse
import base64
import json
import os
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request

FAILURES = []


def check(condition, message):
    if not condition:
        FAILURES.append(message)
        print("FAIL:", message)


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def prometheus_answer(series):
    now = time.time()
    result = [{"metric": labels, "value": [now, value]} for labels, value in series]
    return json.dumps({"status": "success", "data": {"resultType": "vector", "result": result}}).encode()


HEALTHY_HOST = [({"__name__": "up", "instance": "h1:9847", "job": "gpudoctor"}, "1"),
                ({"__name__": "gpudoctor_up", "instance": "h1:9847", "job": "gpudoctor", "hostname": "h1"}, "1"),
                ({"__name__": "gpudoctor_host_info", "instance": "h1:9847", "job": "gpudoctor", "hostname": "h1",
                  "board_serial": "B1"}, "1")]


def metrics_text(hostname, extra=""):
    return ("# TYPE gpudoctor_up gauge\ngpudoctor_up 1\n"
            f'gpudoctor_host_info{{hostname="{hostname}",board_serial="",chassis_serial="",product=""}} 1\n'
            + extra).encode("utf-8", "surrogateescape")


class FleetPage:
    """`gpudoctor fleet ... --listen HOST:PORT` running until the block ends; `base` is its URL."""

    def __init__(self, command, host):
        self.port = free_port()
        self.base = f"http://127.0.0.1:{self.port}"
        self.process = subprocess.Popen(command + ["--listen", f"{host}:{self.port}"],
                                        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)

    def __enter__(self):
        for _ in range(100):
            try:
                get(self.base + "/")
                break
            except OSError:
                time.sleep(0.1)
        return self

    def __exit__(self, *exc):
        self.process.terminate()
        self.process.wait(10)


def parse_json(text, what):
    try:
        return json.loads(text.decode("utf-8"))
    except ValueError as error:
        check(False, f"{what}: not valid JSON ({error}): {text[:300]!r}")
        return {"hosts": []}


def get(url, headers=None):
    request = urllib.request.Request(url, headers=headers or {})
    try:
        with urllib.request.urlopen(request, timeout=20) as answer:
            return answer.status, answer.read()
    except urllib.error.HTTPError as error:
        return error.code, error.read()


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--gpudoctor", required=True)
    parser.add_argument("--source-dir", required=True)
    args = parser.parse_args()
    sys.path.insert(0, os.path.join(args.source_dir, "testing", "hostile_http"))
    import hostile_http as h

    gd = args.gpudoctor
    work = tempfile.mkdtemp(prefix="gpudoctor-hostile-")

    def agents_file(urls, name="agents.txt"):
        path = os.path.join(work, name)
        with open(path, "w") as f:
            f.write("\n".join(urls) + "\n")
        return path

    # 1. A Prometheus that drips its answer: the whole request ends at --timeout.
    with h.HostileServer(h.drip(prometheus_answer(HEALTHY_HOST), 1.0)) as server:
        status, out, err, took, rss = h.run_measured([gd, "fleet", "--prometheus", server.url, "--timeout", "2s"], 60)
        check(status == 69, f"dripping Prometheus: exit {status}, not 69: {err!r}")
        check(took < 8, f"dripping Prometheus held fleet for {took:.1f} s (deadline 2 s)")
        check(b"no complete answer within 2s" in err, f"dripping Prometheus: {err!r}")

    # 2. A dripping agent is a host not answering, and the rest of the fleet is read.
    with h.HostileServer(h.drip(metrics_text("slow"), 1.0)) as slow, \
         h.HostileServer(h.answer(200, metrics_text("fine"))) as fine:
        status, out, err, took, rss = h.run_measured(
            [gd, "--json", "fleet", "--agents", agents_file([slow.url, fine.url]), "--timeout", "2s"], 60)
        check(took < 8, f"dripping agent held fleet for {took:.1f} s")
        body = parse_json(out, "dripping agent")
        states = {host["hostname"]: host["answering"] for host in body["hosts"]}
        check(states.get("fine") is True and states.get(slow.url) is False, f"dripping agent: {states}")

    # 3. Endless headers, an endless body, 60 MB of '[': refused quickly, in bounded memory. The bound is
    # against this binary's own baseline (a good answer), as a sanitizer build is several times larger.
    with h.HostileServer(h.answer(200, prometheus_answer(HEALTHY_HOST))) as server:
        _, _, _, _, baseline = h.run_measured([gd, "fleet", "--prometheus", server.url], 60)
    print(f"baseline: peak RSS {baseline:.1f} MiB")
    for name, behaviour, expected in [
            ("endless headers", h.endless_headers(), b"headers are longer than 65536 bytes"),
            ("endless body", h.endless_body(b"["), b"longer than the limit of 67108864 bytes"),
            ("60 MB of '['", h.answer(200, b"[" * (60 << 20)), b"nests deeper than 32 levels")]:
        with h.HostileServer(behaviour) as server:
            status, out, err, took, rss = h.run_measured([gd, "fleet", "--prometheus", server.url, "--timeout", "30s"],
                                                         60)
            check(status == 69, f"{name}: exit {status}: {err[-300:]!r}")
            check(expected in err, f"{name}: {err[-300:]!r}")
            check(rss < baseline + 150, f"{name}: peak RSS {rss:.0f} MiB, baseline {baseline:.0f} MiB")
            print(f"{name}: exit {status} in {took:.1f} s, peak RSS {rss:.1f} MiB")

    # 4. Sixteen agents each sending /metrics without end: each is cut at its limit.
    servers = [h.HostileServer(h.endless_body(b'gpudoctor_finding{id="x"} 1\n')) for _ in range(16)]
    for server in servers:
        server.__enter__()
    try:
        status, out, err, took, rss = h.run_measured(
            [gd, "--json", "fleet", "--agents", agents_file([s.url for s in servers]), "--timeout", "60s"], 120)
        body = parse_json(out, "16 endless agents")
        check(status == 2 and body["hosts"] and all(not host["answering"] for host in body["hosts"]),
              f"16 endless agents: exit {status}")
        check(rss < baseline + 150, f"16 endless agents: peak RSS {rss:.0f} MiB, baseline {baseline:.0f} MiB")
        print(f"16 endless agents: exit {status} in {took:.1f} s, peak RSS {rss:.1f} MiB")
    finally:
        for server in servers:
            server.__exit__()

    # 5. Labels that are not UTF-8 or hold escapes: valid JSON, a page that answers, no escape printed.
    hostile = metrics_text("node-\udcff\x1b[2J", 'gpudoctor_finding{id="gpu_lost",severity="critical",gpu="3",'
                           'subject="a\\nOK   fleet well",part_of=""} 1\n')
    with h.HostileServer(h.answer(200, hostile)) as agent:
        agents = agents_file([agent.url])
        status, out, err, took, rss = h.run_measured([gd, "--json", "fleet", "--agents", agents], 60)
        check(status == 2, f"hostile labels --json: exit {status}: {err!r}")
        try:
            body = json.loads(out.decode("utf-8"))
            check("node-\ufffd" in body["hosts"][0]["hostname"], f"hostile labels: {body['hosts'][0]['hostname']!r}")
        except (ValueError, KeyError, IndexError) as error:
            check(False, f"hostile labels: fleet --json is not valid JSON ({error}): {out[:300]!r}")
        status, out, err, took, rss = h.run_measured([gd, "--color", "never", "fleet", "--agents", agents], 60)
        check(b"\x1b" not in out + err, f"hostile labels: an escape reached the terminal: {out!r}")
        check(b"\nOK" not in out, f"hostile labels: a label started a line of its own: {out!r}")

        with FleetPage([gd, "fleet", "--agents", agents], "127.0.0.1") as page:
            code, body = get(page.base + "/api/v1/fleet/checklist")
            check(code == 200, f"fleet page with a hostile agent answered {code}")
            try:
                json.loads(body.decode("utf-8"))
            except ValueError as error:
                check(False, f"fleet page: not JSON: {error}")
            code, _ = get(page.base + "/api/v1/fleet/checklist", {"Host": f"attacker.example:{page.port}"})
            check(code == 403, f"fleet page without a token answered {code} to another Host (DNS rebinding)")

    # 6. The page beyond localhost needs a token, and then asks for it.
    status, out, err, took, rss = h.run_measured([gd, "fleet", "--agents", agents_file(["http://127.0.0.1:1"]),
                                                  "--listen", "0.0.0.0:0"], 30)
    check(status == 64 and b"--page-token-file" in err, f"page on 0.0.0.0 without a token: exit {status}: {err!r}")
    token_file = os.path.join(work, "page-token")
    with open(token_file, "w") as f:
        f.write("t0ken\n")
    silent = agents_file(["http://127.0.0.1:1"], "silent.txt")
    with FleetPage([gd, "fleet", "--agents", silent, "--page-token-file", token_file], "0.0.0.0") as page:
        code, _ = get(page.base + "/api/v1/fleet/checklist")
        check(code == 401, f"page with a token answered {code} without it")
        code, _ = get(page.base + "/api/v1/fleet/checklist", {"Authorization": "Bearer t0ken"})
        check(code == 200, f"page with a token answered {code} with it")
        code, _ = get(page.base + "/")
        check(code == 200, f"the page itself answered {code}: it must load to ask for the token")

    # 7. Credentials in the URL are sent as basic authentication and never shown.
    with h.HostileServer(h.answer(200, prometheus_answer(HEALTHY_HOST))) as server:
        url = server.url.replace("http://", "http://ops:hunter2@")
        status, out, err, took, rss = h.run_measured([gd, "--json", "fleet", "--prometheus", url], 30)
        check(status == 0, f"basic auth: exit {status}: {err!r}")
        expected = "Basic " + base64.b64encode(b"ops:hunter2").decode()
        check(all(r["headers"].get("authorization") == expected for r in server.requests),
              f"basic auth: sent {[r['headers'].get('authorization') for r in server.requests]}")
        check(b"hunter2" not in out + err, "basic auth: the password was printed")
    status, out, err, took, rss = h.run_measured(
        [gd, "fleet", "--prometheus", f"http://ops:hunter2@127.0.0.1:{free_port()}/?token=s3cret"], 30)
    check(b"hunter2" not in out + err and b"s3cret" not in out + err, f"a refused URL shows its secrets: {err!r}")

    # 8. A server's error text with escapes is shown, not obeyed.
    error_body = json.dumps({"status": "error", "errorType": "bad_data", "error": "\x1b[2J\x1b[Hall fine"}).encode()
    with h.HostileServer(h.answer(400, error_body)) as server:
        status, out, err, took, rss = h.run_measured([gd, "fleet", "--prometheus", server.url], 30)
        check(status == 69 and b"\x1b" not in err and b"all fine" in err, f"error text: exit {status}: {err!r}")

    # 9. A malformed URL in the agents file is bad data (65), not a missing file (66).
    status, out, err, took, rss = h.run_measured([gd, "fleet", "--agents", agents_file(["gpu01:9847"], "bad.txt")], 30)
    check(status == 65 and b"bad.txt:1" in err, f"malformed agents file: exit {status}: {err!r}")

    if FAILURES:
        print(f"{len(FAILURES)} failures")
        return 1
    print("hostile peers: every request ended by its deadline, memory bounded, JSON valid, nothing obeyed or shown")
    return 0


if __name__ == "__main__":
    sys.exit(main())
