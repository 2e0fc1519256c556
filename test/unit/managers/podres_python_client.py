#!/usr/bin/python3
"""An independent client of the pod resources API (Debian's python3-grpcio,
the C core of gRPC) against podres_serve: raw bytes through grpc's generic
callables, decoded by hand from the protobuf wire format with upstream's
field numbers (k8s.io/kubelet/pkg/apis/podresources/v1/api.proto), so no
generated code and nothing of the project's is involved on this side.

    podres_python_client.py PATH/TO/podres_serve

With `call`, one call on a running agent's socket (test/e2e/dra.sh), its
answer printed as JSON (upstream's field names; exit status 1 on an error):

    podres_python_client.py call SOCKET List
    podres_python_client.py call SOCKET Get NAMESPACE NAME
"""
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time

import grpc

passed = failed = 0


def check(name, cond, detail=""):
    global passed, failed
    if cond:
        passed += 1
    else:
        failed += 1
        print(f"FAIL {name}: {detail}", file=sys.stderr)


def varint(b, i):
    v = shift = 0
    while True:
        c = b[i]
        i += 1
        v |= (c & 0x7F) << shift
        shift += 7
        if c < 0x80:
            return v, i


def fields(b):
    """[(number, value)]: bytes for length-delimited fields, int for varints."""
    out, i = [], 0
    while i < len(b):
        key, i = varint(b, i)
        num, wt = key >> 3, key & 7
        if wt == 0:
            v, i = varint(b, i)
        elif wt == 2:
            n, i = varint(b, i)
            v, i = b[i:i + n], i + n
        else:
            raise ValueError(f"wire type {wt} for field {num}")
        out.append((num, v))
    return out


def get(msg, num):
    return [v for n, v in fields(msg) if n == num]


def devices(msg, num):
    """ContainerDevices: (resource_name=1, [device_ids=2], topology=3 present)."""
    return [(get(d, 1)[0].decode(), [x.decode() for x in get(d, 2)], bool(get(d, 3)))
            for d in get(msg, num)]


def text(msg, num):
    """A string field ("" when unset, as proto3)."""
    v = get(msg, num)
    return v[-1].decode() if v else ""


def dynamic(msg, num):
    """DynamicResource: claim_name=2, claim_namespace=3, claim_resources=4
    (ClaimResource: cdi_devices=1 (CDIDevice: name=1), driver_name=2,
    pool_name=3, device_name=4, share_id=5)."""
    return [{"claim_name": text(d, 2), "claim_namespace": text(d, 3),
             "claim_resources": [{"cdi_devices": [text(x, 1) for x in get(r, 1)],
                                  "driver_name": text(r, 2), "pool_name": text(r, 3),
                                  "device_name": text(r, 4), "share_id": text(r, 5)}
                                 for r in get(d, 4)]}
            for d in get(msg, num)]


def pod(msg):
    """PodResources: name=1, namespace=2, containers=3 (name=1, devices=2,
    cpu_ids=3, memory=4, dynamic_resources=5)."""
    cs = []
    for c in get(msg, 3):
        cs.append({"name": get(c, 1)[0].decode(), "devices": devices(c, 2),
                   "dynamic_resources": dynamic(c, 5),
                   "others": [n for n, _ in fields(c) if n in (3, 4, 5)]})
    return get(msg, 1)[0].decode(), get(msg, 2)[0].decode(), cs


def string_field(num, b):
    """A length-delimited field: key, varint length, bytes."""
    out, n = bytearray([num << 3 | 2]), len(b)
    while n >= 0x80:
        out.append(n & 0x7F | 0x80)
        n >>= 7
    out.append(n)
    return bytes(out) + b


def call(sock, method, *args):
    """One call; the answer's pods as JSON on stdout."""
    req = b""
    if method == "Get":  # pod_name=1, pod_namespace=2
        ns, name = (a.encode() for a in args)
        req = string_field(1, name) + string_field(2, ns)
    ch = grpc.insecure_channel("unix:" + sock)
    try:
        resp = ch.unary_unary(f"/v1.PodResourcesLister/{method}")(req, timeout=10)
    except grpc.RpcError as e:
        print(f"{method}: {e.code()}: {e.details()}", file=sys.stderr)
        sys.exit(1)
    finally:
        ch.close()
    pods = [pod(p) for p in get(resp, 1)]
    print(json.dumps({"pod_resources": [
        {"name": n, "namespace": ns, "containers": [
            {"name": c["name"], "devices": [{"resource_name": r, "device_ids": ids}
                                            for r, ids, _ in c["devices"]],
             "dynamic_resources": c["dynamic_resources"]} for c in cs]}
        for n, ns, cs in pods]}))


def main():
    if sys.argv[1] == "call":
        call(*sys.argv[2:])
        return
    serve = sys.argv[1]
    tmp = tempfile.mkdtemp(prefix="nl-podres-py-")
    sock = os.path.join(tmp, "pod-resources", "kubelet.sock")
    # A cross build's server runs under its emulator (tools/cross-test.sh).
    wrapper = os.environ.get("MESON_EXE_WRAPPER", "").split()
    proc = subprocess.Popen(wrapper + [serve, tmp])
    try:
        for _ in range(500):
            if os.path.exists(os.path.join(tmp, "ready")):
                break
            time.sleep(0.01)
        check("ready", os.path.exists(os.path.join(tmp, "ready")))
        check("socket mode", os.stat(sock).st_mode & 0o777 == 0o600, oct(os.stat(sock).st_mode))
        ch = grpc.insecure_channel("unix:" + sock)

        resp = ch.unary_unary("/v1.PodResourcesLister/List")(b"", timeout=5)
        pods = [pod(p) for p in get(resp, 1)]
        check("List: the active pod only", [p[:2] for p in pods] == [("gw", "edge")], pods)
        cs = pods[0][2] if pods else []
        check("List: the sidecar, then the container", [c["name"] for c in cs] == ["side", "c"],
              cs)
        check("List: one ContainerDevices per device, no topology",
              len(cs) == 2 and cs[1]["devices"] ==
              [("example.com/serial", ["ttyS0"], False), ("example.com/serial", ["ttyS2"], False)],
              cs)
        check("List: no cpu_ids, memory, dynamic_resources",
              all(not c["others"] for c in cs), cs)

        # v1alpha1 (upstream still serves it): every pod of the pod manager,
        # its containers only, v1alpha1's fields only
        resp = ch.unary_unary("/v1alpha1.PodResourcesLister/List")(b"", timeout=5)
        pods = sorted(pod(p) for p in get(resp, 1))
        check("v1alpha1 List: every pod", [p[:2] for p in pods] == [("gw", "edge"), ("old", "edge")],
              pods)
        cs = pods[0][2] if pods else []
        check("v1alpha1 List: the containers, not the sidecar", [c["name"] for c in cs] == ["c"] and
              cs[0]["devices"] == [("example.com/serial", ["ttyS0"], False),
                                   ("example.com/serial", ["ttyS2"], False)] and
              not cs[0]["others"], cs)

        resp = ch.unary_unary("/v1.PodResourcesLister/GetAllocatableResources")(b"", timeout=5)
        check("GetAllocatableResources: the healthy devices",
              devices(resp, 1) == [("example.com/serial", ["ttyS0"], False),
                                   ("example.com/serial", ["ttyS2"], False)], devices(resp, 1))
        check("GetAllocatableResources: no cpu_ids, memory",
              [n for n, _ in fields(resp) if n != 1] == [], fields(resp))

        req = b"\x0a\x02gw\x12\x04edge"  # pod_name=1, pod_namespace=2
        resp = ch.unary_unary("/v1.PodResourcesLister/Get")(req, timeout=5)
        p = pod(get(resp, 1)[0])
        check("Get", p[:2] == ("gw", "edge") and p[2][1]["devices"][0][1] == ["ttyS0"], p)
        try:
            ch.unary_unary("/v1.PodResourcesLister/Get")(b"\x0a\x02no\x12\x04edge", timeout=5)
            check("Get: not found", False, "answered")
        except grpc.RpcError as e:
            check("Get: not found", e.code() == grpc.StatusCode.UNKNOWN and
                  e.details() == "pod no in namespace edge not found", (e.code(), e.details()))
        ch.close()
    finally:
        proc.send_signal(signal.SIGTERM)
        rc = proc.wait(timeout=10)
        check("clean stop", rc == 0, rc)
        shutil.rmtree(tmp, ignore_errors=True)
    print(f"{passed} passed, {failed} failed")
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
