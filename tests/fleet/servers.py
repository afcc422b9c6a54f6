"""What the tests against real servers share: free loopback ports, HTTP and Prometheus queries,
waiting, and the daemons a test starts (each with its log, all stopped at the end).

    from servers import Daemons, TestFailure, free_ports, wait_until

Python's standard library only.
"""

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.parse
import urllib.request


def find_binary(*names):
    for name in names:
        path = shutil.which(name)
        if path:
            return path
    return None


def free_ports(count):
    """Distinct free loopback ports: all bound at once (so they differ), then released."""
    sockets = []
    try:
        for _ in range(count):
            s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            s.bind(("127.0.0.1", 0))
            sockets.append(s)
        return [s.getsockname()[1] for s in sockets]
    finally:
        for s in sockets:
            s.close()


def http_get(url, timeout=5):
    with urllib.request.urlopen(url, timeout=timeout) as response:
        return response.status, response.read()


def wait_until(what, predicate, deadline_s, step_s=0.25):
    deadline = time.monotonic() + deadline_s
    last_error = None
    while time.monotonic() < deadline:
        try:
            if predicate():
                return
        except (OSError, urllib.error.URLError, ValueError) as error:
            last_error = error
        time.sleep(step_s)
    raise TestFailure(f"timed out after {deadline_s}s waiting for {what}" +
                      (f" (last error: {last_error})" if last_error else ""))


class TestFailure(Exception):
    pass


class Daemons:
    """Processes started by the test, each with its log file; all stopped on close."""

    def __init__(self, workdir):
        self.workdir = workdir
        self.procs = []  # (name, Popen, log path)

    def start(self, name, argv):
        log_path = os.path.join(self.workdir, f"{name}.log")
        log = open(log_path, "wb")
        proc = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                cwd=self.workdir)
        log.close()
        self.procs.append((name, proc, log_path))
        return proc

    def check_alive(self):
        for name, proc, log_path in self.procs:
            if proc.poll() is not None:
                raise TestFailure(f"{name} exited with status {proc.returncode} (log: {log_path})")

    def close(self):
        for _, proc, _ in self.procs:
            if proc.poll() is None:
                proc.send_signal(signal.SIGTERM)
        deadline = time.monotonic() + 10
        for _, proc, _ in self.procs:
            try:
                proc.wait(timeout=max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()

    def print_logs(self, tail_bytes=6000):
        for name, _, log_path in self.procs:
            try:
                with open(log_path, "rb") as f:
                    f.seek(0, os.SEEK_END)
                    size = f.tell()
                    f.seek(max(0, size - tail_bytes))
                    text = f.read().decode("utf-8", "replace")
            except OSError as error:
                text = f"(cannot read: {error})"
            print(f"----- {name} log ({log_path}, last {tail_bytes} bytes) -----\n{text}", file=sys.stderr)


def prometheus_query(port, query):
    url = f"http://127.0.0.1:{port}/api/v1/query?" + urllib.parse.urlencode({"query": query})
    _, body = http_get(url)
    answer = json.loads(body)
    if answer.get("status") != "success":
        raise ValueError(f"query {query!r}: {answer}")
    return answer["data"]["result"]
