#!/usr/bin/python3
"""Hostile clients for test/e2e/hostile_floods.sh and tools/bench/hostile_bench.sh:
each flood runs against 127.0.0.1 for a bounded time and count, then exits.

  hostile_client.py pipeline PORT TLS MIB SECONDS   one connection pipelining GET /pods, never reading
  hostile_client.py bodies PORT TLS N SECONDS       N connections each POSTing a 1 MiB body, no credentials
  hostile_client.py slowloris PORT TLS N SECONDS    N connections holding half a head, reopened when closed
  hostile_client.py idle PORT NTCP NTLS SECONDS     NTCP silent sockets and NTLS stalled TLS handshakes

TLS is 1 or 0. Prints one line of what it did. Loopback only: it connects to
127.0.0.1 from 127.0.0.2, an address of its own as an attacker on the network
has, apart from the API server's; with HOSTILE_SOURCES=N from N addresses
(127.0.0.2 and up, in turn), as a crowd of attackers."""
import os
import selectors
import socket
import ssl
import sys
import time

HOST = "127.0.0.1"
SOURCES = max(1, min(250, int(os.environ.get("HOSTILE_SOURCES", "1"))))
_turn = 0


def source():
    global _turn
    _turn += 1
    return (f"127.0.0.{2 + _turn % SOURCES}", 0)


def tls_context():
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    ctx.check_hostname = False
    ctx.verify_mode = ssl.CERT_NONE
    return ctx


def connect(port, tls, ctx, blocking=True):
    s = socket.create_connection((HOST, port), timeout=5, source_address=source())
    if tls:
        s = ctx.wrap_socket(s, server_hostname="n")
    s.setblocking(blocking)
    return s


def pipeline(port, tls, mib, secs):
    """Sends MIB MiB of pipelined requests without reading an answer; the
    server must stop reading rather than queue every answer."""
    s = connect(port, tls, tls_context())
    s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    req = b"GET /pods HTTP/1.1\r\nHost: x\r\n\r\n"
    chunk = req * (65536 // len(req))
    total, want = 0, mib << 20
    s.setblocking(False)
    end = time.monotonic() + secs
    while total < want and time.monotonic() < end:
        try:
            total += s.send(chunk)
        except (ssl.SSLWantWriteError, BlockingIOError):
            time.sleep(0.01)
        except OSError:
            break
    while time.monotonic() < end:
        time.sleep(0.1)
    print(f"pipeline: sent {total} bytes of requests, read none")
    s.close()


def bodies(port, tls, n, secs):
    """n connections, each a POST /pods with Content-Length 1 MiB and as much
    of the body as the server takes, without credentials."""
    ctx = tls_context()
    head = b"POST /pods HTTP/1.1\r\nHost: x\r\nContent-Length: 1048576\r\n\r\n"
    body = b"b" * 65536
    conns = []
    for _ in range(n):
        try:
            s = connect(port, tls, ctx)
            s.sendall(head)
            s.setblocking(False)
            conns.append([s, 0])
        except OSError:
            pass
    sent = 0
    end = time.monotonic() + secs
    while time.monotonic() < end:
        busy = False
        for c in conns:
            if c[1] >= 1 << 20:
                continue
            try:
                k = c[0].send(body[: min(len(body), (1 << 20) - c[1])])
                c[1] += k
                sent += k
                busy = True
            except (ssl.SSLWantWriteError, BlockingIOError):
                pass
            except OSError:
                c[1] = 1 << 20
        if not busy:
            time.sleep(0.05)
    print(f"bodies: {len(conns)} connections, {sent} body bytes taken by the server")
    for c in conns:
        c[0].close()


def slowloris(port, tls, n, secs):
    """n connections that each send half a request head and nothing more,
    their handshakes driven side by side; one the server closes is opened
    again until the time is up."""
    ctx = tls_context()
    sel = selectors.DefaultSelector()
    half = b"GET /pods HTTP/1.1\r\n"
    opened, most, held = 0, 0, 0
    end = time.monotonic() + secs

    def open_one():
        nonlocal opened
        s = socket.socket()
        s.bind(source())
        s.setblocking(False)
        s.connect_ex((HOST, port))
        if tls:
            s = ctx.wrap_socket(s, server_hostname="n", do_handshake_on_connect=False)
        sel.register(s, selectors.EVENT_WRITE, "connecting")
        opened += 1

    def drop(s):
        sel.unregister(s)
        s.close()

    while time.monotonic() < end:
        while len(sel.get_map()) < n:
            try:
                open_one()
            except OSError:
                break
        for key, _ in sel.select(timeout=0.1):
            s, state = key.fileobj, key.data
            try:
                if state == "connecting":
                    if tls:
                        s.do_handshake()
                    s.send(half)
                    sel.modify(s, selectors.EVENT_READ, "held")
                elif not s.recv(4096):
                    drop(s)
            except (ssl.SSLWantReadError, BlockingIOError):
                sel.modify(s, selectors.EVENT_READ, state)
            except ssl.SSLWantWriteError:
                sel.modify(s, selectors.EVENT_WRITE, state)
            except OSError:
                drop(s)
        held = sum(1 for k in sel.get_map().values() if k.data == "held")
        most = max(most, held)
    print(f"slowloris: {opened} connections opened, at most {most} holding half a head at once")
    for key in list(sel.get_map().values()):
        key.fileobj.close()


def idle(port, ntcp, ntls, secs):
    """ntcp sockets that never send, and ntls that send the first bytes of a
    TLS ClientHello and stall in the handshake."""
    socks = []
    for _ in range(ntcp):
        try:
            socks.append(socket.create_connection((HOST, port), timeout=5, source_address=source()))
        except OSError:
            pass
    hello = bytes.fromhex("160301020001") + os.urandom(32)  # record and handshake heads, cut short
    for _ in range(ntls):
        try:
            s = socket.create_connection((HOST, port), timeout=5, source_address=source())
            s.sendall(hello)
            socks.append(s)
        except OSError:
            pass
    time.sleep(secs)
    alive = 0
    for s in socks:
        s.setblocking(False)
        try:
            alive += s.recv(1) == b"" and 0 or 1
        except BlockingIOError:
            alive += 1
        except OSError:
            pass
        s.close()
    print(f"idle: {len(socks)} sockets opened, {alive} still open at the end")


def main():
    mode, args = sys.argv[1], [int(a) for a in sys.argv[2:]]
    if mode == "pipeline":
        pipeline(*args)
    elif mode == "bodies":
        bodies(*args)
    elif mode == "slowloris":
        slowloris(*args)
    elif mode == "idle":
        idle(*args)
    else:
        sys.exit(f"unknown flood {mode}")


if __name__ == "__main__":
    main()
