#!/usr/bin/env python3
"""What the control plane sees of a node, for test/e2e/uplink_impaired.sh.

  uplink_watch.py poll API CA CERT KEY NODE OUT
      Every second, the Node's Ready status and the Lease's renewTime and
      leaseDurationSeconds as the API server has them (straight to it, not
      through the proxy), one line to OUT: "EPOCH READY RENEWTIME DURATION"
      ("error" for a field whose GET failed).

  uplink_watch.py check OUT FROM TO
      Over the polls from FROM to TO (epoch seconds): prints "polls P
      notready N errors E renewals R maxgap G duration D excused X", where G
      is the longest time between two renewals first seen (and from the last
      one to TO), in seconds. A gap during which a poll failed (the API server
      itself unreachable: another test restarted the shared control plane) is
      not the node's: it is left out of G and counted in X.
"""
import json
import ssl
import sys
import time
import urllib.request


def get(url, ctx):
    with urllib.request.urlopen(url, context=ctx, timeout=5) as r:
        return json.load(r)


def poll(api, ca, cert, key, node, out):
    ctx = ssl.create_default_context(cafile=ca)
    ctx.load_cert_chain(cert, key)
    with open(out, "a", buffering=1) as f:
        while True:
            t = time.time()
            try:
                n = get(f"{api}/api/v1/nodes/{node}", ctx)
                conds = n.get("status", {}).get("conditions") or []
                ready = next((c["status"] for c in conds if c.get("type") == "Ready"), "none")
            except Exception:
                ready = "error"
            try:
                spec = get(f"{api}/apis/coordination.k8s.io/v1/namespaces/kube-node-lease/leases/{node}",
                           ctx)["spec"]
                renew, dur = spec.get("renewTime") or "none", spec.get("leaseDurationSeconds", 0)
            except Exception:
                renew, dur = "error", 0
            f.write(f"{t:.3f} {ready} {renew} {dur}\n")
            time.sleep(max(0.0, 1.0 - (time.time() - t)))


def check(out, t_from, t_to):
    polls = notready = errors = 0
    seen = []  # first-seen times of each renewTime
    failed = []  # times of failed polls
    last = None
    duration = 0
    with open(out) as f:
        for line in f:
            parts = line.split()
            if len(parts) != 4:
                continue
            t = float(parts[0])
            if t < t_from or t > t_to:
                continue
            polls += 1
            ready, renew, dur = parts[1], parts[2], int(parts[3])
            if ready == "error" or renew == "error":
                errors += 1
                failed.append(t)
            elif ready != "True":
                notready += 1
            if renew not in ("error", "none"):
                duration = dur or duration
                if renew != last:
                    last = renew
                    seen.append(t)
    spans = list(zip(seen, seen[1:]))
    if seen:
        spans.append((seen[-1], t_to))
    gaps = [b - a for a, b in spans if not any(a < t < b for t in failed)]
    excused = len(spans) - len(gaps)
    if not seen:
        gaps = [t_to - t_from]
    maxgap = max(gaps) if gaps else 0.0
    print(f"polls {polls} notready {notready} errors {errors} renewals {max(len(seen) - 1, 0)} "
          f"maxgap {maxgap:.1f} duration {duration} excused {excused}")


if __name__ == "__main__":
    if sys.argv[1] == "poll":
        poll(*sys.argv[2:8])
    elif sys.argv[1] == "check":
        check(sys.argv[2], float(sys.argv[3]), float(sys.argv[4]))
    else:
        sys.exit(__doc__)
