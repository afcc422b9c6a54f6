"""Servers that misbehave on purpose, on loopback, for gpudoctor's tests and
benchmarks of everything it reads from other machines: `gpudoctor fleet`
(Prometheus' API, agents' /metrics) and the agent's webhooks.

Each server answers every request with one behaviour:
  answer(status, body, headers)   a normal answer (the baseline)
  drip(body, every_s)             a correct answer, one byte every `every_s` seconds
  endless_headers()               a status line, then headers for ever
  endless_body(piece)             a chunked body that never ends
  hold()                          reads the request, then says nothing
A server records each request (method, path, headers) it read.

    with HostileServer(drip(b"...", 1.0)) as server:
        subprocess.run(["gpudoctor", "fleet", "--prometheus", server.url, "--timeout", "2s"])
"""
import socket
import threading
import time


def _read_request(conn):
    data = b""
    conn.settimeout(10)
    while b"\r\n\r\n" not in data and len(data) < 1 << 20:
        chunk = conn.recv(65536)
        if not chunk:
            return None
        data += chunk
    head, _, rest = data.partition(b"\r\n\r\n")
    lines = head.decode("latin-1").split("\r\n")
    method, path = (lines[0].split(" ") + ["", ""])[:2]
    headers = {}
    for line in lines[1:]:
        name, _, value = line.partition(":")
        headers[name.strip().lower()] = value.strip()
    length = int(headers.get("content-length", "0") or 0)
    while len(rest) < length:
        chunk = conn.recv(65536)
        if not chunk:
            break
        rest += chunk
    return {"method": method, "path": path, "headers": headers, "body": rest}


def answer(status=200, body=b"", headers=None):
    def behave(conn, request, stop):
        extra = "".join(f"{k}: {v}\r\n" for k, v in (headers or {}).items())
        conn.sendall(f"HTTP/1.1 {status} X\r\nContent-Length: {len(body)}\r\nConnection: close\r\n{extra}\r\n"
                     .encode() + body)
    return behave


def drip(body=b"{}", every_s=1.0):
    def behave(conn, request, stop):
        data = f"HTTP/1.1 200 OK\r\nContent-Length: {len(body)}\r\nConnection: close\r\n\r\n".encode() + body
        for i in range(len(data)):
            if stop.is_set():
                return
            conn.sendall(data[i:i + 1])
            stop.wait(every_s)
    return behave


def endless_headers():
    def behave(conn, request, stop):
        conn.sendall(b"HTTP/1.1 200 OK\r\n")
        line = b"X-Padding: " + b"p" * 1000 + b"\r\n"
        block = line * 64
        while not stop.is_set():
            conn.sendall(block)
    return behave


def endless_body(piece=b"["):
    def behave(conn, request, stop):
        conn.sendall(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n")
        block = piece * max(1, (1 << 16) // len(piece))
        chunk = f"{len(block):x}\r\n".encode() + block + b"\r\n"
        while not stop.is_set():
            conn.sendall(chunk)
    return behave


def hold():
    def behave(conn, request, stop):
        stop.wait(600)
    return behave


class HostileServer:
    def __init__(self, behaviour, host="127.0.0.1"):
        self.behaviour = behaviour
        self.requests = []
        self._stop = threading.Event()
        self._listener = socket.socket()
        self._listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self._listener.bind((host, 0))
        self._listener.listen(64)
        self.port = self._listener.getsockname()[1]
        self.url = f"http://{host}:{self.port}"
        self._thread = threading.Thread(target=self._serve, daemon=True)

    def __enter__(self):
        self._thread.start()
        return self

    def __exit__(self, *exc):
        self._stop.set()
        self._listener.close()

    def _serve(self):
        while not self._stop.is_set():
            try:
                conn, _ = self._listener.accept()
            except OSError:
                return
            threading.Thread(target=self._handle, args=(conn,), daemon=True).start()

    def _handle(self, conn):
        try:
            request = _read_request(conn)
            if request is None:
                return
            self.requests.append(request)
            self.behaviour(conn, request, self._stop)
        except OSError:
            pass  # the client gave up: what we test
        finally:
            conn.close()


def _high_water_mib(pid):
    try:
        with open(f"/proc/{pid}/status") as status:
            for line in status:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) / 1024
    except OSError:
        pass
    return None


def run_measured(command, timeout_s=120, env=None):
    """Runs `command`; returns (exit status, stdout, stderr, seconds, peak RSS in MiB).

    The exit status is -9 when it was killed at `timeout_s`. The peak is the
    process's VmHWM, read every few milliseconds while it runs (ru_maxrss would
    count this Python process, which the child was forked from)."""
    import os
    import signal
    import subprocess
    import tempfile
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        start = time.monotonic()
        process = subprocess.Popen(command, stdout=out, stderr=err, env=env)
        deadline = start + timeout_s
        peak = 0.0
        while process.poll() is None:
            high = _high_water_mib(process.pid)
            if high is not None:
                peak = max(peak, high)
            if time.monotonic() > deadline:
                os.kill(process.pid, signal.SIGKILL)
                process.wait()
                break
            time.sleep(0.005)
        took = time.monotonic() - start
        out.seek(0)
        err.seek(0)
        return process.returncode, out.read(), err.read(), took, peak
