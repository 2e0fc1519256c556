#!/usr/bin/env bash
# Prints the address the tests give nanolet as --node-ip: NANOLET_TEST_NODE_IP
# when set, else a non-loopback IPv4 address of this host — the default
# route's source address, else the first global one (the CNI bridge's gateway
# on a machine with no other). nanolet refuses a loopback node IP, as upstream's
# node status does, and the apiserver's node proxy refuses one too. Exits 1
# when the host has no such address.
set -euo pipefail
if [ -n "${NANOLET_TEST_NODE_IP:-}" ]; then echo "$NANOLET_TEST_NODE_IP"; exit 0; fi
# `ip route get` only looks the route up: nothing is sent.
ip=$(ip -4 -o route get 192.0.2.255 2>/dev/null | sed -n 's/.* src \([0-9.]*\).*/\1/p')
[ -n "$ip" ] || ip=$(ip -4 -o addr show scope global 2>/dev/null | awk '{sub("/.*", "", $4); print $4; exit}')
[ -n "$ip" ] || { echo "node-ip.sh: no non-loopback IPv4 address here (set NANOLET_TEST_NODE_IP)" >&2; exit 1; }
echo "$ip"
