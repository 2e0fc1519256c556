#!/usr/bin/env python3
"""Prints a TCP port that is free on every address and lies outside the
kernel's ephemeral range. A port that bind(0) hands out is an ephemeral one,
and an outgoing connection (kubectl's, a probe's) may take it before the server
it was meant for binds it: 'address already in use'."""
import random
import socket
import sys

with open("/proc/sys/net/ipv4/ip_local_port_range") as f:
    lo, hi = map(int, f.read().split())
# below the ephemeral range when it leaves room there, else above it
ports = range(20000, lo) if lo - 20000 >= 1000 else range(hi + 1, 65536)
for _ in range(500):
    port = random.choice(ports)
    s = socket.socket()
    try:
        s.bind(("0.0.0.0", port))
    except OSError:
        continue
    finally:
        s.close()
    print(port)
    sys.exit(0)
sys.exit("free-port: no free port found")
