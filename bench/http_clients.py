#!/usr/bin/env python3
"""Hostile and bursty HTTP clients for bench/http_metrics.sh.

  http_clients.py slowloris HOST PORT COUNT SECONDS
      keeps COUNT connections open for SECONDS, each trickling one header byte
      every 0.5 s and never finishing its request; a connection the server
      closes is opened again at once. Prints "slowloris_reconnects=N".
  http_clients.py burst HOST PORT COUNT PATH
      opens COUNT connections at once, then sends "GET PATH" on each and waits
      up to 30 s for the answers. Prints "burst_ok=N burst_failed=N".
"""
import resource
import selectors
import socket
import sys
import time


def slowloris(host, port, count, seconds):
    def open_one():
        s = socket.create_connection((host, port))
        s.setblocking(False)
        s.send(b"GET /metrics HTTP/1.1\r\nHost: bench\r\nX-Trickle: ")
        return s

    conns = [open_one() for _ in range(count)]
    reconnects = 0
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        time.sleep(0.5)
        for i, s in enumerate(conns):
            try:
                s.recv(4096)  # an answer or the end: the server is done with it
                answered = True
            except BlockingIOError:
                answered = False  # open and silent: what a slow client wants
            except OSError:
                answered = True
            if not answered:
                try:
                    s.send(b"a")
                    continue
                except OSError:
                    pass
            s.close()
            conns[i] = open_one()
            reconnects += 1
    for s in conns:
        s.close()
    print(f"slowloris_reconnects={reconnects}")


def burst(host, port, count, path):
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (max(soft, min(hard, count + 64)), hard))
    selector = selectors.DefaultSelector()
    request = f"GET {path} HTTP/1.1\r\nHost: {host}:{port}\r\nConnection: close\r\n\r\n".encode()
    replies = {}
    failed = 0
    for _ in range(count):
        s = socket.socket()
        s.setblocking(False)
        err = s.connect_ex((host, port))
        if err not in (0, 115):  # EINPROGRESS
            failed += 1
            s.close()
            continue
        replies[s] = b""
        selector.register(s, selectors.EVENT_WRITE)
    deadline = time.monotonic() + 30
    ok = 0
    while replies and time.monotonic() < deadline:
        for key, events in selector.select(timeout=0.5):
            s = key.fileobj
            try:
                if events & selectors.EVENT_WRITE:
                    s.send(request)
                    selector.modify(s, selectors.EVENT_READ)
                    continue
                data = s.recv(65536)
            except OSError:
                data = None
            if data:
                replies[s] += data
                continue
            answered = replies.pop(s).startswith(b"HTTP/1.1 200")
            ok += answered
            failed += not answered
            selector.unregister(s)
            s.close()
    failed += len(replies)  # no answer in time
    print(f"burst_ok={ok} burst_failed={failed}")


def main():
    if len(sys.argv) != 6 or sys.argv[1] not in ("slowloris", "burst"):
        sys.exit(__doc__)
    host, port, count = sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
    if sys.argv[1] == "slowloris":
        slowloris(host, port, count, float(sys.argv[5]))
    else:
        burst(host, port, count, sys.argv[5])


if __name__ == "__main__":
    main()
