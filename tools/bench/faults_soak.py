"""The faults soak's driver (run by tools/bench/faults_soak.sh, which sets up
the private instance and passes it in SOAK_* and NANOLET_TEST_* variables).

  faults_soak.py MINUTES SEED

Starts nanolet joined, creates the load, then for MINUTES runs a fault
schedule drawn from SEED (printed first; the same seed gives the same
schedule), a churn client (scale, roll out, delete, recreate, as a deployment
controller's user would) and an invariant checker. Each fault is injected,
held, ended; then the time until the node has converged again (Node Ready,
every pod's API status agreeing with the runtime, nothing of a deleted pod left
running, the controllers' counts met) is measured. The last line is the
verdict: `faults-soak: PASS` or `faults-soak: FAIL <what>`.
"""
import errno
import hashlib
import json
import math
import os
import random
import signal
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request

MINUTES = int(sys.argv[1])
SEED = int(sys.argv[2])
E = os.environ
RUN = E["SOAK_RUN"]
ROOT = E["SOAK_ROOT"]
CRI = E["SOAK_CRI"]
NANOLET = E["NANOLET"]
KUBECTL = E["NANOLET_TEST_KUBECTL"]
NODE = "soak-node"
NS = E.get("SOAK_NS", "soak")  # another per instance (FAULTS_SOAK_INSTANCE)
STATIC_NS = NS + "-static"
IMG = "localhost/busybox:1.36"
CONVERGE_BOUND_S = 300  # a fault that has not converged by then fails the run
STATIC_PODS = 5
T0 = time.monotonic()
# The one pod whose container is meant to restart (CrashLoopBackOff).
CRASHER = "crasher"
# The agent's event client: upstream's defaults (eventRecordQPS, eventBurst),
# which the soak's configuration leaves as they are.
EVENT_QPS, EVENT_BURST = 50, 100


def now():
    return time.monotonic() - T0


def log(msg):
    print(f"[{now():7.1f}] {msg}", flush=True)


def sh(args, timeout=30, env=None, check=False):
    """Runs a command; returns (status, stdout). A timeout is status 124."""
    try:
        p = subprocess.run(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=timeout,
                           env=env, text=True)
    except subprocess.TimeoutExpired:
        return 124, ""
    if check and p.returncode != 0:
        raise RuntimeError(f"{' '.join(args)}: {p.stderr.strip()[-300:]}")
    return p.returncode, p.stdout


def kubectl(*args, timeout=20, stdin=None):
    try:
        p = subprocess.run([KUBECTL, *args], input=stdin, stdout=subprocess.PIPE,
                           stderr=subprocess.PIPE, timeout=timeout, text=True)
    except subprocess.TimeoutExpired:
        return 124, "", "timed out"
    return p.returncode, p.stdout, p.stderr


def parsed(rc, out):
    """A command's JSON output, or None when it failed."""
    if rc != 0:
        return None
    try:
        return json.loads(out)
    except ValueError:
        return None


def kget(*args):
    rc, out, _ = kubectl("get", *args, "-o", "json", "--request-timeout=8s", timeout=15)
    return parsed(rc, out)


def cri(*args):
    return parsed(*sh([NANOLET, "cri", "-r", CRI, "--timeout", "5s", *args, "-o", "json"], timeout=12))


def pct(xs, p):
    if not xs:
        return None
    xs = sorted(xs)
    return xs[min(len(xs) - 1, max(0, math.ceil(p / 100 * len(xs)) - 1))]


# --- the violations ------------------------------------------------------------

VIOLATIONS = []
VLOCK = threading.Lock()


def violation(what):
    with VLOCK:
        VIOLATIONS.append((now(), what))
    log(f"VIOLATION: {what}")


class SoakThread(threading.Thread):
    """A thread of the soak (the checker, the churn client) whose failure
    fails the run: a checker that died would otherwise leave the run to go on
    and pass unchecked."""

    def __init__(self):
        super().__init__(daemon=True)

    def run(self):
        try:
            self.loop()
        except Exception as e:
            import traceback
            traceback.print_exc()
            violation(f"the soak's {type(self).__name__.lower()} failed: {type(e).__name__}: {e}")


# --- the agent -----------------------------------------------------------------

class Agent:
    """nanolet as its init script runs it: one process, restarted after each
    kill; its wall clock under libfaketime (FAKETIME_TIMESTAMP_FILE, read
    again every second; monotonic time untouched)."""

    def __init__(self):
        self.healthz = free_port()
        self.port = free_port()
        self.ro_port = free_port()
        self.manifests = os.path.join(RUN, "manifests")
        os.makedirs(self.manifests, exist_ok=True)
        self.clock_file = os.path.join(RUN, "faketime")
        self.set_clock(0)
        self.config = os.path.join(RUN, "config.yaml")
        # Eviction on the root dir's filesystem is off: the soak fills it on
        # purpose, and evicting its pods is the eviction tests' matter.
        with open(self.config, "w") as f:
            f.write(f"""apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
authentication:
  x509: {{clientCAFile: {E['NANOLET_TEST_K8S_CA']}}}
staticPodPath: {self.manifests}
rotateCertificates: true
fileCheckFrequency: 5s
evictionHard:
  memory.available: 100Mi
  nodefs.available: "0%"
  nodefs.inodesFree: "0%"
  imagefs.available: "0%"
""")
        self.log_path = os.path.join(RUN, "agent.log")
        self.proc = None
        self.expect_exit = False
        self.down_since = None
        self.downtime = []  # (start, end) of each time the agent was down
        self.starts = 0

    def set_clock(self, offset_s):
        tmp = self.clock_file + ".tmp"
        with open(tmp, "w") as f:
            f.write(f"{offset_s:+d}\n")
        os.rename(tmp, self.clock_file)

    def start(self):
        env = dict(E)
        env.update({
            "LD_PRELOAD": E["SOAK_FAKETIME_LIB"],
            "FAKETIME_TIMESTAMP_FILE": self.clock_file,
            "FAKETIME_CACHE_DURATION": "1",
            "FAKETIME_DONT_FAKE_MONOTONIC": "1",
            "FAKETIME_DONT_RESET": "1",
            "NO_FAKE_STAT": "1",
            # an ASan build with libfaketime preloaded before its runtime
            "ASAN_OPTIONS": "verify_asan_link_order=0:" + E.get("ASAN_OPTIONS", ""),
        })
        args = [NANOLET, "--config", self.config, "--kubeconfig", E["SOAK_NODE_KUBECONFIG"],
                "--bootstrap-kubeconfig", E["SOAK_BOOTSTRAP_KUBECONFIG"],
                "--hostname-override", NODE, "--root-dir", ROOT, "--cert-dir", os.path.join(ROOT, "pki"),
                "--container-runtime-endpoint", CRI, "--cgroup-root", E["SOAK_CGROUP_ROOT"],
                "--healthz-port", str(self.healthz), "--port", str(self.port),
                "--read-only-port", str(self.ro_port), "-v=2"]
        if E.get("SOAK_NODE_IP"):
            args += ["--node-ip", E["SOAK_NODE_IP"]]
        out = open(self.log_path, "a")
        self.proc = subprocess.Popen(args, stdout=out, stderr=subprocess.STDOUT, env=env,
                                     start_new_session=True)
        out.close()
        with open(os.path.join(RUN, "agent.pid"), "w") as f:
            f.write(f"{self.proc.pid}\n")
        self.expect_exit = False
        self.starts += 1
        if self.down_since is not None:
            self.downtime.append((self.down_since, now()))
            self.down_since = None
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                break
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{self.healthz}/healthz", timeout=2) as r:
                    if r.read() == b"ok":
                        return True
            except OSError:
                pass
            time.sleep(0.2)
        violation(f"the agent did not answer /healthz within 60 s of its start "
                  f"(status {self.proc.poll()}): {tail(self.log_path, 3)}")
        return False

    def kill(self, sig=signal.SIGKILL):
        if self.proc is None:
            return
        self.expect_exit = True
        self.proc.send_signal(sig)
        self.proc.wait()
        self.down_since = now()

    def check_alive(self):
        if self.proc is None or self.expect_exit:
            return True
        rc = self.proc.poll()
        if rc is None:
            return True
        violation(f"the agent exited on its own with status {rc}: {tail(self.log_path, 5)}")
        self.expect_exit = True
        self.down_since = now()
        return False

    def downtime_within(self, a, b):
        spans = list(self.downtime) + ([(self.down_since, b)] if self.down_since is not None else [])
        return sum(max(0, min(e, b) - max(s, a)) for s, e in spans)

    def usage(self):
        """(RSS kB, open fds) of the running agent, or None."""
        if self.proc is None or self.proc.poll() is not None:
            return None
        try:
            with open(f"/proc/{self.proc.pid}/status") as f:
                rss = next(int(line.split()[1]) for line in f if line.startswith("VmRSS:"))
            fds = len(os.listdir(f"/proc/{self.proc.pid}/fd"))
        except (OSError, StopIteration):
            return None
        return rss, fds


def free_port():
    """One outside the ephemeral range (tools/testenv/free-port.py says why)."""
    script = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "testenv", "free-port.py")
    return int(subprocess.check_output([script], text=True))


def tail(path, n):
    try:
        with open(path, errors="replace") as f:
            return " | ".join(line.rstrip() for line in f.readlines()[-n:])
    except OSError:
        return ""


# --- the state files: never torn -----------------------------------------------

CLIENT_CURRENT = "pki/kubelet-client-current.pem"
CLIENT_PAIR = "pki/kubelet-client-"  # then <time>.pem: each client pair the agent was issued


def state_files():
    """The files the agent writes with replace-by-rename, that a kill must
    leave whole and that state_corrupt damages: the pod checkpoint, the device
    checkpoint, the serving certificate and key, and the client certificate in
    use (kubelet-client-current.pem, a link to its pair: damaged, the pair it
    points at is)."""
    out = []
    for rel in ("api-pods.checkpoint", "device-plugins/kubelet_internal_checkpoint"):
        if os.path.isfile(os.path.join(ROOT, rel)):
            out.append(rel)
    pki = os.path.join(ROOT, "pki")
    if os.path.isdir(pki):
        out += sorted("pki/" + f for f in os.listdir(pki) if f.endswith((".crt", ".key", ".pem"))
                      and not ("pki/" + f).startswith(CLIENT_PAIR))
        if os.path.exists(os.path.join(ROOT, CLIENT_CURRENT)):
            out.append(CLIENT_CURRENT)
    return out


def pair_serial(path):
    """(serial, None) when path holds a certificate for the node and the key
    of that certificate, else (None, what is wrong)."""
    rc, out = sh(["openssl", "x509", "-noout", "-serial", "-subject", "-pubkey", "-in", path])
    if rc != 0:
        return None, "openssl x509 cannot read a certificate in it"
    serial = next((line.split("=", 1)[1] for line in out.splitlines() if line.startswith("serial=")), None)
    if f"system:node:{NODE}" not in out:
        return None, "not a certificate of the node"
    pub = out[out.find("-----BEGIN PUBLIC KEY-----"):].strip()
    rc, kpub = sh(["openssl", "pkey", "-pubout", "-in", path])
    if rc != 0:
        return None, "openssl pkey cannot read a key in it"
    if kpub.strip() != pub:
        return None, "its key is not the certificate's"
    return serial, None


class ClientCert:
    """The rotating client credential: the pair kubelet-client-current.pem
    points at, looked at every 3 s and after every kill. Each distinct serial
    is recorded (the first is the bootstrap's, each other one a rotation).
    After a kill the pair in use must be whole (a certificate of the node and
    its key) and be the last one seen or a new one that the cluster CA signed
    and that is valid; every other pair must be whole too, and the kubeconfig
    the bootstrap wrote must read back. Pairs the soak damaged itself
    (state_corrupt) are left out."""

    def __init__(self):
        self.lock = threading.Lock()
        self.seen = []  # (t, serial, file) of each distinct certificate, in order
        self.last = None  # (file, inode, mtime, size) of the last pair read whole
        self.damaged = set()
        self.kills = []  # t of each agent kill

    def damage(self, path):
        with self.lock:
            self.damaged.add(os.path.realpath(path))

    def look(self, after=None):
        link = os.path.join(ROOT, CLIENT_CURRENT)
        with self.lock:
            try:
                target = os.path.realpath(link, strict=True)
                st = os.stat(target)
            except OSError as e:
                if after and self.seen:
                    violation(f"{CLIENT_CURRENT} after {after}: {e}")
                return
            key = (target, st.st_ino, st.st_mtime_ns, st.st_size)
            if (after is None and key == self.last) or target in self.damaged:
                return
            serial, why = pair_serial(target)
            if why:
                if after:
                    violation(f"{CLIENT_CURRENT} -> {os.path.basename(target)} is torn after {after}: {why}")
                return
            self.last = key
            serials = [x[1] for x in self.seen]
            if serials and serial == serials[-1]:
                return
            if serial in serials:
                violation(f"{CLIENT_CURRENT} went back to an earlier certificate (serial {serial})"
                          + (f" after {after}" if after else ""))
                return
            rc, out = sh(["openssl", "verify", "-CAfile", E["NANOLET_TEST_K8S_CA"], target])
            if rc != 0:
                violation(f"{CLIENT_CURRENT} -> {os.path.basename(target)}: a new certificate that "
                          f"the cluster CA does not vouch for now: {out.strip()[-200:]}")
                return
            self.seen.append((now(), serial, os.path.basename(target)))
            log(f"  client certificate {len(self.seen)}: serial {serial} ({os.path.basename(target)})")

    def check_pairs(self, after):
        pki = os.path.join(ROOT, "pki")
        names = sorted(f for f in os.listdir(pki) if ("pki/" + f).startswith(CLIENT_PAIR)
                       and f.endswith(".pem") and "pki/" + f != CLIENT_CURRENT)
        for f in names:
            path = os.path.join(pki, f)
            if os.path.islink(path) or os.path.realpath(path) in self.damaged:
                continue
            _, why = pair_serial(path)
            if why:
                violation(f"pki/{f} is torn after {after}: {why}")
        try:
            with open(E["SOAK_NODE_KUBECONFIG"]) as fh:
                kc = json.load(fh)  # (the agent writes it as JSON)
            user = kc["users"][0]["user"]
            if user.get("client-certificate") != os.path.join(ROOT, CLIENT_CURRENT):
                violation(f"the kubeconfig after {after}: its user is {user}, not {CLIENT_CURRENT}")
        except (OSError, ValueError, KeyError, IndexError) as e:
            violation(f"the kubeconfig the bootstrap wrote is torn after {after}: {type(e).__name__}: {e}")

    def summary(self):
        """(rotations, kills within 30 s of one, the closest kill to one in s or None)."""
        changes = [t for t, _, _ in self.seen[1:]]
        gaps = [min(abs(k - t) for t in changes) for k in self.kills] if changes else []
        return len(changes), sum(1 for g in gaps if g <= 30), (min(gaps) if gaps else None)


CLIENT = ClientCert()


def whole(rel):
    """None when the file reads back whole, else what is wrong with it."""
    path = os.path.join(ROOT, rel)
    try:
        with open(path, "rb") as f:
            data = f.read()
    except OSError as e:
        return f"unreadable: {e}"
    if rel == "api-pods.checkpoint":
        magic = b"nanolet-pod-checkpoint v1 sha256:"
        nl = data.find(b"\n")
        if not data.startswith(magic) or nl < 0:
            return "bad header"
        want, blen = data[len(magic):nl].split(b" ")
        body = data[nl + 1:]
        if int(blen) != len(body):
            return f"body of {len(body)} bytes, the header says {int(blen)}"
        if hashlib.sha256(body).hexdigest().encode() != want:
            return "checksum mismatch"
        return None
    if rel.endswith("kubelet_internal_checkpoint"):
        try:
            json.loads(data)
        except ValueError as e:
            return f"not JSON: {e}"
        return None
    kind = "x509" if rel.endswith(".crt") else "pkey"
    rc, _ = sh(["openssl", kind, "-noout", "-in", path])
    return None if rc == 0 else f"openssl {kind} cannot read it"


def check_whole(after):
    """After a kill: every state file whole, the client credential too."""
    CLIENT.kills.append(now())
    for rel in state_files():
        if rel == CLIENT_CURRENT:
            continue
        why = whole(rel)
        if why:
            violation(f"{rel} is torn after {after}: {why}")
    CLIENT.look(after)
    CLIENT.check_pairs(after)


# --- the load --------------------------------------------------------------------

TOLERATE = ("tolerations: [{key: node.kubernetes.io/unreachable, operator: Exists, effect: NoExecute}, "
            "{key: node.kubernetes.io/not-ready, operator: Exists, effect: NoExecute}]")
SLEEP = "trap 'exit 0' TERM; sleep 86400 & wait"


WEB = f"""      initContainers:
      - name: init
        image: {IMG}
        command: [sh, -c, 'echo "$GREETING" > /work/index.html']
        env: [{{name: GREETING, valueFrom: {{configMapKeyRef: {{name: soak-config, key: greeting}}}}}}]
        volumeMounts: [{{name: work, mountPath: /work}}]
      containers:
      - name: httpd
        image: {IMG}
        command: [httpd, -f, -p, "8080", -h, /work]
        env: [{{name: TOKEN, valueFrom: {{secretKeyRef: {{name: soak-secret, key: token}}}}}}]
        envFrom: [{{configMapRef: {{name: soak-config}}}}]
        volumeMounts:
        - {{name: work, mountPath: /work}}
        - {{name: config, mountPath: /etc/config}}
        - {{name: secret, mountPath: /etc/secret}}
        readinessProbe: {{httpGet: {{path: /index.html, port: 8080}}, periodSeconds: 10}}
        livenessProbe: {{tcpSocket: {{port: 8080}}, periodSeconds: 10, failureThreshold: 3}}
      volumes:
      - {{name: work, emptyDir: {{}}}}
      - {{name: config, configMap: {{name: soak-config}}}}
      - {{name: secret, secret: {{secretName: soak-secret}}}}"""
SLEEPERS = f"""      containers:
      - name: sleep
        image: {IMG}
        command: [sh, -c, "{SLEEP}"]
        volumeMounts: [{{name: config, mountPath: /etc/config}}]
      volumes: [{{name: config, configMap: {{name: soak-config}}}}]"""
CHURN_REV = ", annotations: {soak/rev: '0'}"  # what the churn client's rollouts change
CHURN = f"""      containers:
      - name: sleep
        image: {IMG}
        command: [sh, -c, "{SLEEP}"]
        env: [{{name: MODE, valueFrom: {{configMapKeyRef: {{name: soak-config, key: mode}}}}}}]"""


def deployment(name, replicas, grace, pod, annotations=""):
    """A Deployment of the load: pod is its pod spec's lines after the
    common ones (indented 6)."""
    return f"""apiVersion: apps/v1
kind: Deployment
metadata: {{name: {name}, namespace: {NS}}}
spec:
  replicas: {replicas}
  selector: {{matchLabels: {{app: {name}}}}}
  template:
    metadata: {{labels: {{app: {name}}}{annotations}}}
    spec:
      automountServiceAccountToken: false
      terminationGracePeriodSeconds: {grace}
      {TOLERATE}
{pod}"""


def load_yaml():
    return f"""
apiVersion: v1
kind: ConfigMap
metadata: {{name: soak-config, namespace: {NS}}}
data: {{greeting: hello, mode: soak}}
---
apiVersion: v1
kind: Secret
metadata: {{name: soak-secret, namespace: {NS}}}
stringData: {{token: s3cret}}
---
{deployment("web", 8, 5, WEB)}
---
{deployment("sleepers", 14, 2, SLEEPERS)}
---
{deployment("churn", 3, 2, CHURN, CHURN_REV)}
---
apiVersion: apps/v1
kind: DaemonSet
metadata: {{name: agent-ds, namespace: {NS}}}
spec:
  selector: {{matchLabels: {{app: agent-ds}}}}
  template:
    metadata: {{labels: {{app: agent-ds}}}}
    spec:
      automountServiceAccountToken: false
      terminationGracePeriodSeconds: 2
      containers:
      - name: httpd
        image: {IMG}
        command: [sh, -c, 'mkdir -p /www && echo ok > /www/healthz && exec httpd -f -p 8081 -h /www']
        startupProbe: {{httpGet: {{path: /healthz, port: 8081}}, periodSeconds: 2, failureThreshold: 30}}
        livenessProbe: {{httpGet: {{path: /healthz, port: 8081}}, periodSeconds: 10}}
        readinessProbe: {{tcpSocket: {{port: 8081}}, periodSeconds: 10}}
---
{crasher_yaml()}
---
{prestop_yaml()}
"""


def crasher_yaml():
    return f"""apiVersion: v1
kind: Pod
metadata: {{name: {CRASHER}, namespace: {NS}}}
spec:
  automountServiceAccountToken: false
  terminationGracePeriodSeconds: 1
  {TOLERATE}
  containers: [{{name: crash, image: {IMG}, command: [sh, -c, 'sleep 2; exit 1']}}]"""


def prestop_yaml():
    return f"""apiVersion: v1
kind: Pod
metadata: {{name: prestop, namespace: {NS}}}
spec:
  automountServiceAccountToken: false
  terminationGracePeriodSeconds: 10
  {TOLERATE}
  containers:
  - name: main
    image: {IMG}
    command: [sh, -c, "{SLEEP}"]
    lifecycle: {{preStop: {{exec: {{command: [sh, -c, 'sleep 1']}}}}}}"""


def write_static_pods(agent):
    for i in range(1, STATIC_PODS + 1):
        path = os.path.join(agent.manifests, f"static-{i}.yaml")
        with open(path + ".tmp", "w") as f:
            f.write(f"""apiVersion: v1
kind: Pod
metadata: {{name: static-{i}, namespace: {STATIC_NS}}}
spec:
  terminationGracePeriodSeconds: 2
  containers: [{{name: sleep, image: {IMG}, command: [sh, -c, "{SLEEP}"]}}]
""")
        os.rename(path + ".tmp", path)


def apply(yaml_text):
    rc, _, err = kubectl("apply", "-f", "-", stdin=yaml_text, timeout=60)
    if rc != 0:
        raise RuntimeError(f"kubectl apply: {err.strip()[-400:]}")


# --- what the node runs, and whether it has converged ----------------------------

def pod_key(p):
    return f"{p['metadata']['namespace']}/{p['metadata']['name']}"


def runtime_view():
    """(sandboxes, containers) of the runtime, or None when it does not answer."""
    pods = cri("pods")
    ctrs = cri("ps", "-a")
    if pods is None or ctrs is None:
        return None
    return pods.get("items") or [], ctrs.get("containers") or []


def label(o, k):
    return (o.get("labels") or {}).get(k, "")


def converged():
    """(True, "") when the node has converged, else (False, why)."""
    node = kget("node", NODE)
    if node is None:
        return False, "the API server does not answer"
    ready = [c for c in node["status"].get("conditions", []) if c["type"] == "Ready"]
    if not ready or ready[0]["status"] != "True":
        return False, "Node not Ready"
    pods = kget("pods", "-A", "--field-selector", f"spec.nodeName={NODE}")
    ctl = kget("deployments,daemonsets", "-n", NS)
    rt = runtime_view()
    if pods is None or ctl is None:
        return False, "the API server does not answer"
    if rt is None:
        return False, "the runtime does not answer"
    sandboxes, ctrs = rt
    for o in ctl["items"]:
        st, name = o.get("status", {}), f"{o['kind']} {o['metadata']['name']}"
        if st.get("observedGeneration", 0) < o["metadata"]["generation"]:
            return False, f"{name} not observed"
        if o["kind"] == "Deployment":
            want = o["spec"]["replicas"]
            if (st.get("readyReplicas", 0), st.get("updatedReplicas", 0), st.get("replicas", 0)) != (want,) * 3:
                return False, f"{name}: {st.get('readyReplicas', 0)} ready, {st.get('updatedReplicas', 0)} updated, {st.get('replicas', 0)} of {want}"
        elif st.get("numberReady", 0) != st.get("desiredNumberScheduled", -1) or st.get("desiredNumberScheduled", 0) < 1:
            return False, f"{name}: {st.get('numberReady', 0)} of {st.get('desiredNumberScheduled', 0)} ready"
    api = {}
    for p in pods["items"]:
        if p["metadata"]["namespace"] not in (NS, STATIC_NS):
            continue
        if p["metadata"].get("deletionTimestamp"):
            return False, f"{pod_key(p)} is being deleted"
        uid = p["metadata"]["uid"]
        if p["metadata"]["namespace"] == STATIC_NS:  # a mirror pod: its own uid
            uid = p["metadata"].get("annotations", {}).get("kubernetes.io/config.mirror", uid)
        api[uid] = p
    statics = sum(1 for p in api.values() if p["metadata"]["namespace"] == STATIC_NS)
    if statics != STATIC_PODS:
        return False, f"{statics} of {STATIC_PODS} mirror pods"
    ready_sb = {}
    for s in sandboxes:
        if s.get("state") != "SANDBOX_READY" or s["metadata"].get("namespace") not in (NS, STATIC_NS):
            continue
        ready_sb.setdefault(s["metadata"]["uid"], []).append(s)
    running = {}
    for c in ctrs:
        if c.get("state") != "CONTAINER_RUNNING" or label(c, "io.kubernetes.pod.namespace") not in (NS, STATIC_NS):
            continue
        running.setdefault(label(c, "io.kubernetes.pod.uid"), {})[label(c, "io.kubernetes.container.name")] = c["id"]
    for uid in set(ready_sb) | set(running):
        if uid not in api:
            return False, f"a pod no longer in the API still runs in the runtime (uid {uid})"
    for uid, p in api.items():
        key = pod_key(p)
        if len(ready_sb.get(uid, [])) != 1:
            return False, f"{key}: {len(ready_sb.get(uid, []))} ready sandboxes"
        if p["metadata"]["name"] == CRASHER:
            continue
        st = p.get("status", {})
        if st.get("phase") != "Running":
            return False, f"{key}: phase {st.get('phase')}"
        conds = {c["type"]: c["status"] for c in st.get("conditions", [])}
        if conds.get("Ready") != "True":
            return False, f"{key}: not Ready"
        for cs in st.get("containerStatuses", []):
            rid = running.get(uid, {}).get(cs["name"])
            if rid is None:
                return False, f"{key}: container {cs['name']} not running in the runtime"
            if cs.get("containerID", "").split("://")[-1] != rid or "running" not in cs.get("state", {}):
                return False, f"{key}: container {cs['name']}'s status is not the runtime's ({cs.get('containerID')} against {rid[:13]})"
    return True, ""


# --- the invariant checker ---------------------------------------------------------

class Checker(SoakThread):
    """Samples the runtime every 3 s: no two ready sandboxes for one pod uid,
    no container or sandbox of a pod replaced (restarted) but the crasher's,
    the static pods present (never missing longer than the agent's downtime
    plus 5 s), the agent alive; and its RSS and fds every 10 s."""

    def __init__(self, agent, faults):
        super().__init__()
        self.agent = agent
        self.faults = faults
        self.stop = threading.Event()
        self.containers = {}  # (uid, container name) -> running container id
        self.sandbox = {}  # uid -> ready sandbox id
        self.static_missing = {}  # name -> since
        self.usage = []  # (t, rss kB, fds, seconds since the agent's start)
        self.restarts = []  # (t, what, fault in progress or last)
        self.samples = 0
        self.started_at = now()
        self.event_counts = {}  # event uid -> count seen (one write per create or count bump)
        self.event_writes = 0
        self.event_last = None  # (t, agent starts) of the last events sample
        self.event_peak = (0, 0.0)  # most writes between two samples, over how many seconds

    def loop(self):
        next_usage = 0
        while not self.stop.wait(3):
            self.agent.check_alive()
            t = now()
            if t >= next_usage:
                u = self.agent.usage()
                if u:
                    self.usage.append((t, u[0], u[1], t - self.agent.last_start))
                next_usage = t + 10
                self.events()
            CLIENT.look()
            rt = runtime_view()
            if rt is None:
                continue
            self.samples += 1
            self.check(*rt)

    def check(self, sandboxes, ctrs):
        t = now()
        per_uid = {}
        for s in sandboxes:
            if s.get("state") == "SANDBOX_READY" and s["metadata"].get("namespace") in (NS, STATIC_NS):
                per_uid.setdefault(s["metadata"]["uid"], []).append(s)
        for uid, ss in per_uid.items():
            name = f"{ss[0]['metadata']['namespace']}/{ss[0]['metadata']['name']}"
            if len(ss) > 1:
                violation(f"{len(ss)} ready sandboxes for pod {name} (uid {uid})")
            old = self.sandbox.get(uid)
            if old and old != ss[0]["id"] and len(ss) == 1:
                self.restart(f"pod {name}'s sandbox replaced")
            self.sandbox[uid] = ss[0]["id"]
        statics = set()
        for c in ctrs:
            if c.get("state") != "CONTAINER_RUNNING":
                continue
            ns = label(c, "io.kubernetes.pod.namespace")
            if ns not in (NS, STATIC_NS):
                continue
            pod = label(c, "io.kubernetes.pod.name")
            if ns == STATIC_NS:
                statics.add(pod)
            key = (label(c, "io.kubernetes.pod.uid"), label(c, "io.kubernetes.container.name"))
            old = self.containers.get(key)
            if old and old != c["id"] and pod != CRASHER:
                self.restart(f"container {ns}/{pod}/{key[1]} restarted")
            self.containers[key] = c["id"]
        for i in range(1, STATIC_PODS + 1):
            name = f"static-{i}-{NODE}"
            if name in statics or now() < 120:
                self.static_missing.pop(name, None)
                continue
            since = self.static_missing.setdefault(name, t)
            allowed = self.agent.downtime_within(since, t) + 5
            if t - since > allowed + 3:  # (+3: the sampling period)
                violation(f"static pod {name} missing for {t - since:.0f} s (the agent was down {allowed - 5:.0f} s of it)")
                self.static_missing[name] = t

    def events(self):
        """The agent's Event writes since the last sample (the API's events of
        source.host NODE, each create or count bump one write) against its
        token bucket: at most EVENT_BURST plus EVENT_QPS a second, and a fresh
        burst for each agent start between the two samples."""
        evs = kget("events", "-A")
        if evs is None:  # the API is away: the next sample counts these writes
            return
        t, starts = now(), self.agent.starts
        n = 0
        for e in evs.get("items", []):
            if (e.get("source") or {}).get("host") != NODE:
                continue
            uid, c = e["metadata"]["uid"], e.get("count") or 1
            n += max(0, c - self.event_counts.get(uid, 0))
            self.event_counts[uid] = max(c, self.event_counts.get(uid, 0))
        self.event_writes += n
        if self.event_last:
            dt = t - self.event_last[0]
            bursts = 1 + starts - self.event_last[1]
            if n > self.event_peak[0]:
                self.event_peak = (n, dt)
            if n > EVENT_BURST * bursts + EVENT_QPS * dt:
                violation(f"{n} event writes in {dt:.0f} s, over the rate limit "
                          f"({EVENT_QPS}/s, burst {EVENT_BURST})")
        self.event_last = (t, starts)

    def restart(self, what):
        f = self.faults.current or self.faults.last
        self.restarts.append((now(), what, f))
        violation(f"{what} (fault {f or 'none'})")


# --- the faults ----------------------------------------------------------------------

KINDS = ["agent_kill", "containerd_kill", "containerd_stop", "apiserver_stop", "uplink_cut",
         "uplink_slow", "uplink_reset", "disk_full", "inodes_full", "clock_step", "state_corrupt"]
# Faults that can be held under another one (combined).
AMBIENT = ["uplink_slow", "disk_full", "clock_step", "inodes_full"]


def draw(rng, kind):
    """The parameters of one fault of KIND."""
    if kind == "agent_kill":
        return {"during": rng.choice(["create", "delete", "update", "scale", "idle"]),
                "kill_after_s": round(rng.uniform(0, 2), 1), "down_s": round(rng.uniform(0, 5), 1)}
    if kind == "containerd_kill":
        return {"down_s": round(rng.uniform(0, 10), 1)}
    if kind == "containerd_stop":
        return {"hold_s": round(rng.uniform(5, 60), 1)}
    if kind == "apiserver_stop":  # 5 s to 5 min, log-uniform
        return {"hold_s": round(math.exp(rng.uniform(math.log(5), math.log(300))), 1)}
    if kind == "uplink_cut":
        return {"mode": rng.choice(["refused", "blackhole"]), "hold_s": round(rng.uniform(5, 120), 1)}
    if kind == "uplink_slow":
        return {"latency_ms": rng.randrange(200, 2000), "jitter_ms": rng.randrange(0, 300),
                "rate_kBps": rng.randrange(4, 64), "hold_s": round(rng.uniform(30, 150), 1)}
    if kind == "uplink_reset":
        return {"after_ms": rng.randrange(200, 5000), "hold_s": round(rng.uniform(10, 60), 1)}
    if kind in ("disk_full", "inodes_full"):
        return {"hold_s": round(rng.uniform(20, 120), 1)}
    if kind == "clock_step":
        return {"step_s": rng.choice([-600, 600]), "hold_s": round(rng.uniform(30, 150), 1)}
    if kind == "state_corrupt":
        return {"pick": rng.random(), "how": rng.choice(["truncate", "empty", "flip", "garbage"]),
                "down_s": round(rng.uniform(0, 3), 1)}
    raise AssertionError(kind)


def schedule(seed, only=None, n=400):
    """The fault schedule of SEED: each entry a gap, a fault and, one time in
    four, an ambient fault held under it. The kinds come in shuffled rounds
    of all of them, so that a short run meets each kind. ONLY (a list of
    kinds, to try faults one by one): those kinds in that order, round after
    round, alone."""
    rng = random.Random(seed)
    out, kinds = [], []
    while len(out) < n:
        if not kinds:
            kinds = list(reversed(only)) if only else list(KINDS)
            if not only:
                rng.shuffle(kinds)
        kind = kinds.pop()
        e = {"gap_s": round(rng.uniform(10, 40), 1), "kind": kind, "params": draw(rng, kind)}
        if rng.random() < 0.25 and not only:
            amb = rng.choice([k for k in AMBIENT if k != kind])
            e["ambient"] = {"kind": amb, "params": draw(rng, amb)}
        out.append(e)
    return out


def controlplane(*args):
    with open(os.path.join(RUN, "controlplane.log"), "a") as lg:
        return subprocess.run([E["SOAK_CONTROLPLANE"], *args], stdout=subprocess.DEVNULL, stderr=lg,
                              timeout=300).returncode


def toxi(method, path, body=None):
    """toxiproxy's API. Removing a bandwidth toxic waits for the data it holds
    to drain at its rate: up to 2 minutes. A toxic that cannot hand what it
    holds on within toxiproxy's 5 s (to a slow toxic after it) is answered 503
    and stays: asked again, for 2 minutes."""
    deadline = time.monotonic() + 120
    while True:
        req = urllib.request.Request(E["SOAK_TOXI_API"] + path, method=method,
                                     data=json.dumps(body).encode() if body is not None else None,
                                     headers={"Content-Type": "application/json"})
        try:
            with urllib.request.urlopen(req, timeout=120) as r:
                r.read()
            return
        except urllib.error.HTTPError as e:
            if e.code != 503 or time.monotonic() > deadline:
                raise
            time.sleep(1)


class Faults:
    def __init__(self, agent, churn):
        self.agent = agent
        self.churn = churn
        self.current = None
        self.last = None
        self.fill = os.path.join(ROOT, ".soak-fill")
        self.inodes = os.path.join(ROOT, ".soak-inodes")

    def containerd_pid(self):
        with open(E["SOAK_CONTAINERD_PID"]) as f:
            return int(f.read().split()[0])

    def containerd_start(self):
        env = dict(E, NANOLET_TESTENV_NO_APT="1", NANOLET_TESTENV_NO_REGISTRY="1",
                   NANOLET_TESTENV_BRIDGE=E["SOAK_BRIDGE"], NANOLET_TESTENV_SUBNET=E["SOAK_SUBNET"],
                   NANOLET_TESTENV_CONTAINERD=E.get("SOAK_PRIVATE_CONTAINERD", ""))
        with open(os.path.join(RUN, "setup.log"), "a") as lg:
            rc = subprocess.run([E["SOAK_SETUP"]], stdout=subprocess.DEVNULL, stderr=lg, env=env,
                                timeout=180).returncode
        if rc != 0:
            violation(f"containerd did not start again (setup.sh status {rc})")

    def controlplane(self, *args):
        return controlplane(*args)

    # Each fault: inject(kind, params) returns the function that ends it.
    def inject(self, kind, p):
        if kind == "agent_kill":
            if p["during"] != "idle":
                self.churn.act(p["during"])
            time.sleep(p["kill_after_s"])
            self.agent.kill()
            check_whole("a kill -9 of the agent")
            time.sleep(p["down_s"])
            self.agent.start()
            return lambda: None
        if kind == "containerd_kill":
            os.kill(self.containerd_pid(), signal.SIGKILL)
            time.sleep(p["down_s"])
            self.containerd_start()
            return lambda: None
        if kind == "containerd_stop":
            pid = self.containerd_pid()
            os.kill(pid, signal.SIGSTOP)
            self.stopped = pid
            time.sleep(p["hold_s"])
            os.kill(pid, signal.SIGCONT)
            self.stopped = None
            return lambda: None
        if kind == "apiserver_stop":
            self.controlplane("stop", "kube-apiserver")
            time.sleep(p["hold_s"])
            return self.controlplane_up
        if kind == "uplink_cut":
            if p["mode"] == "refused":
                toxi("POST", "/proxies/uplink", {"enabled": False})
                return lambda: toxi("POST", "/proxies/uplink", {"enabled": True})
            for s in ("upstream", "downstream"):
                toxi("POST", "/proxies/uplink/toxics", {"name": f"cut_{s}", "type": "timeout", "stream": s,
                                                        "attributes": {"timeout": 0}})
            return lambda: [toxi("DELETE", f"/proxies/uplink/toxics/cut_{s}") for s in ("upstream", "downstream")]
        if kind == "uplink_slow":
            for s in ("upstream", "downstream"):
                toxi("POST", "/proxies/uplink/toxics", {"name": f"lat_{s}", "type": "latency", "stream": s,
                                                        "attributes": {"latency": p["latency_ms"], "jitter": p["jitter_ms"]}})
                toxi("POST", "/proxies/uplink/toxics", {"name": f"bw_{s}", "type": "bandwidth", "stream": s,
                                                        "attributes": {"rate": p["rate_kBps"]}})
            # the bandwidth toxics first: the latency ones drain into them
            return lambda: [toxi("DELETE", f"/proxies/uplink/toxics/{t}_{s}")
                            for t in ("bw", "lat") for s in ("upstream", "downstream")]
        if kind == "uplink_reset":
            toxi("POST", "/proxies/uplink/toxics", {"name": "reset", "type": "reset_peer", "stream": "downstream",
                                                    "attributes": {"timeout": p["after_ms"]}})
            return lambda: toxi("DELETE", "/proxies/uplink/toxics/reset")
        if kind == "disk_full":
            st = os.statvfs(ROOT)
            size = st.f_bavail * st.f_frsize - st.f_blocks * st.f_frsize // 100
            if size > 0:
                if os.path.isdir(self.inodes) and os.listdir(self.inodes):
                    os.unlink(os.path.join(self.inodes, "0"))  # (under inodes_full: one for the fill)
                fd = os.open(self.fill, os.O_CREAT | os.O_WRONLY, 0o600)
                try:
                    os.posix_fallocate(fd, 0, size)
                finally:
                    os.close(fd)
            st = os.statvfs(ROOT)
            log(f"  root dir {100 - 100 * st.f_bavail / st.f_blocks:.1f}% full")
            return lambda: os.unlink(self.fill) if os.path.exists(self.fill) else None
        if kind == "inodes_full":
            os.makedirs(self.inodes, exist_ok=True)
            n = 0
            try:
                while n < 100000:
                    os.close(os.open(os.path.join(self.inodes, str(n)), os.O_CREAT | os.O_WRONLY, 0o600))
                    n += 1
            except OSError as e:
                if e.errno != errno.ENOSPC:
                    raise
            log(f"  {n} inodes taken, {os.statvfs(ROOT).f_favail} left")
            return self.inodes_release
        if kind == "clock_step":
            self.agent.set_clock(p["step_s"])
            return lambda: self.agent.set_clock(0)
        if kind == "state_corrupt":
            self.agent.kill()
            check_whole("a kill -9 of the agent")
            files = state_files()
            rel = files[int(p["pick"] * len(files))] if files else None
            if rel:
                if rel == CLIENT_CURRENT:
                    CLIENT.damage(os.path.join(ROOT, rel))
                corrupt(os.path.join(ROOT, rel), p["how"])
                log(f"  {rel}: {p['how']}")
            time.sleep(p["down_s"])
            self.agent.start()
            return lambda: None
        raise AssertionError(kind)

    def controlplane_up(self):
        if self.controlplane("up") != 0:
            violation("the control plane did not come up again")

    def inodes_release(self):
        for f in os.listdir(self.inodes):
            os.unlink(os.path.join(self.inodes, f))
        os.rmdir(self.inodes)

    def held(self, kind, p):
        """Injects, holds (for faults with hold_s), ends."""
        end = self.inject(kind, p)
        if kind not in ("apiserver_stop", "containerd_stop") and "hold_s" in p:
            time.sleep(p["hold_s"])
        end()


def corrupt(path, how):
    with open(path, "rb") as f:
        data = f.read()
    if how == "truncate":
        data = data[: len(data) // 2]
    elif how == "empty":
        data = b""
    elif how == "flip":
        if data:
            i = len(data) // 3
            data = data[:i] + bytes([data[i] ^ 0x55]) + data[i + 1:]
    else:
        data = os.urandom(max(64, len(data) // 4))
    with open(path, "wb") as f:
        f.write(data)


# --- the churn client ------------------------------------------------------------

class Churn(SoakThread):
    """A user of the cluster: every 5-20 s one of scale, roll out, delete a
    pod, recreate the preStop pod, change the ConfigMap. Paused while a
    fault's convergence is measured."""

    def __init__(self, seed):
        super().__init__()
        self.rng = random.Random(seed * 7919 + 1)
        self.stop = threading.Event()
        self.paused = threading.Event()
        self.lock = threading.Lock()
        self.rev = 0
        self.actions = 0

    def loop(self):
        while not self.stop.wait(self.rng.uniform(5, 20)):
            if self.paused.is_set():
                continue
            self.act(self.rng.choice(["create", "delete", "update", "scale", "config"]))

    def act(self, what):
        with self.lock:
            self.actions += 1
            if what == "scale":
                kubectl("scale", "-n", NS, "deployment/churn", f"--replicas={self.rng.randint(1, 5)}")
            elif what == "update":
                self.rev += 1
                kubectl("patch", "-n", NS, "deployment/churn", "-p",
                        json.dumps({"spec": {"template": {"metadata": {"annotations": {"soak/rev": str(self.rev)}}}}}))
            elif what == "config":
                self.rev += 1
                kubectl("patch", "-n", NS, "configmap/soak-config", "-p", json.dumps({"data": {"rev": str(self.rev)}}))
            elif what == "delete":
                pods = kget("pods", "-n", NS, "-l", "app=sleepers")
                if pods and pods["items"]:
                    p = self.rng.choice(sorted(x["metadata"]["name"] for x in pods["items"]))
                    kubectl("delete", "pod", "-n", NS, p, "--wait=false")
            elif what == "create":
                # the preStop pod deleted (its hook runs) or, once gone, created again
                rc, _, _ = kubectl("get", "pod", "-n", NS, "prestop")
                if rc == 0:
                    kubectl("delete", "pod", "-n", NS, "prestop", "--wait=false")
                else:
                    kubectl("apply", "-f", "-", stdin=prestop_yaml())


# --- the run -------------------------------------------------------------------------

def wait_converged(bound_s, what):
    """Seconds until converged() holds, or None after bound_s (a violation).
    What it waited for longest is logged when that took 30 s or more."""
    t0 = time.monotonic()
    why, waits = "", {}
    next_cp = time.monotonic() + 20
    while time.monotonic() - t0 < bound_s:
        t = time.monotonic()
        ok, why = converged()
        if ok:
            took = time.monotonic() - t0
            if took >= 30:
                longest = max(waits, key=waits.get)
                log(f"  (waited longest, {waits[longest]:.0f} s, for: {longest})")
            return took
        time.sleep(2)
        if time.monotonic() >= next_cp:
            # a component of the control plane that exited (kube-scheduler
            # after an API server restart: "Scheduler cache is corrupted") is
            # the test bed's fault, not the node's: started again, and said
            next_cp = time.monotonic() + 20
            if controlplane("status") != 0:
                log("  the control plane is not whole: controlplane.sh up")
                controlplane("up")
        key = why.split(":")[0] if why.startswith(("Deployment", "DaemonSet", "soak")) else why
        waits[key] = waits.get(key, 0) + time.monotonic() - t
    violation(f"{what}: not converged within {bound_s} s: {why}")
    return None


def main():
    only = [k for k in E.get("FAULTS_SOAK_ONLY", "").split(",") if k]
    unknown = [k for k in only if k not in KINDS]
    if unknown:
        return verdict(False, f"FAULTS_SOAK_ONLY: unknown kinds {','.join(unknown)} (kinds: {','.join(KINDS)})")
    sched = schedule(SEED, only)
    print(f"faults-soak: seed {SEED}{'; only ' + ','.join(only) if only else ''}; "
          "the schedule's first entries (gap s, fault, parameters):")
    for e in sched[:25]:
        amb = f" under {e['ambient']['kind']} {json.dumps(e['ambient']['params'])}" if "ambient" in e else ""
        print(f"  {e['gap_s']:5.1f}  {e['kind']} {json.dumps(e['params'])}{amb}")
    sys.stdout.flush()
    agent = Agent()
    agent.last_start = 0
    orig_start = agent.start

    def start_recording():
        agent.last_start = now()
        return orig_start()
    agent.start = start_recording

    kubectl("delete", "node", NODE, "--ignore-not-found")
    for ns in (NS, STATIC_NS):
        kubectl("create", "ns", ns)
    deadline = time.monotonic() + 60
    while kubectl("get", "serviceaccount", "default", "-n", NS)[0] != 0:
        if time.monotonic() > deadline:
            return verdict(False, "the namespace's service account was never made")
        time.sleep(1)
    write_static_pods(agent)
    if not agent.start():
        return verdict(False, "the agent did not start")
    apply(load_yaml())
    log("load applied: 3 Deployments (web 8, sleepers 14, churn 3), a DaemonSet, a crasher, a preStop pod; 5 static pods")
    took = wait_converged(CONVERGE_BOUND_S, "the first start")
    if took is None:
        return finish(agent, None, None, {})
    log(f"converged after the first start in {took:.1f} s")

    churn = Churn(SEED)
    faults = Faults(agent, churn)
    checker = Checker(agent, faults)
    checker.start()
    churn.start()
    conv = {}
    end_at = now() + MINUTES * 60
    done = 0
    try:
        for e in sched:
            if now() + e["gap_s"] >= end_at:
                break
            time.sleep(e["gap_s"])
            kind = e["kind"]
            label_ = kind + (f"+{e['ambient']['kind']}" if "ambient" in e else "")
            log(f"fault {done + 1}: {label_} {json.dumps(e['params'])}"
                + (f" under {json.dumps(e['ambient']['params'])}" if "ambient" in e else ""))
            faults.current = label_
            amb_end, amb_until = None, 0
            if "ambient" in e:
                amb_end = faults.inject(e["ambient"]["kind"], e["ambient"]["params"])
                amb_until = time.monotonic() + e["ambient"]["params"]["hold_s"]
            faults.held(kind, e["params"])
            if amb_end:  # held for its own time, or as long as the fault under it
                time.sleep(max(0, amb_until - time.monotonic()))
                amb_end()
            faults.last, faults.current = label_, None
            churn.paused.set()
            took = wait_converged(CONVERGE_BOUND_S, f"fault {done + 1} ({label_})")
            churn.paused.clear()
            done += 1
            if took is None:
                break
            conv.setdefault(kind, []).append(took)
            log(f"  converged in {took:.1f} s")
            with VLOCK:
                if VIOLATIONS:
                    break
    finally:
        churn.stop.set()
        churn.join()
        checker.stop.set()
        checker.join()
    if not VIOLATIONS:
        took = wait_converged(CONVERGE_BOUND_S, "the end")
    return finish(agent, checker, churn, conv)


def finish(agent, checker, churn, conv):
    # restarts the API counts (a restart between two samples too), the crasher's aside
    pods = kget("pods", "-n", NS)
    for p in (pods or {}).get("items", []):
        if p["metadata"]["name"] == CRASHER:
            continue
        for cs in p.get("status", {}).get("containerStatuses", []):
            if cs.get("restartCount", 0) > 0:
                violation(f"{pod_key(p)}/{cs['name']}: restartCount {cs['restartCount']}")
    print("\nfaults-soak: convergence after each fault, by kind (s):")
    print(f"  {'kind':16} {'n':>3} {'p50':>7} {'p99':>7} {'max':>7}")
    for k in KINDS:
        xs = conv.get(k, [])
        if xs:
            print(f"  {k:16} {len(xs):3d} {pct(xs, 50):7.1f} {pct(xs, 99):7.1f} {max(xs):7.1f}")
        else:
            print(f"  {k:16} {0:3d}")
    results = {"seed": SEED, "minutes": MINUTES, "convergence": conv, "agent_starts": agent.starts,
               "violations": VIOLATIONS}
    if checker:
        u = checker.usage
        # the agent's own figures, away from its start (a restart begins afresh)
        settled = [x for x in u if x[3] >= 60] or u
        if settled:
            span = settled[-1][0] - settled[0][0]
            win = min(600, span / 3) if span > 0 else 0
            first = [x for x in settled if x[0] <= settled[0][0] + win]
            last = [x for x in settled if x[0] >= settled[-1][0] - win]
            rss0, rss1 = max(x[1] for x in first), max(x[1] for x in last)
            fd0, fd1 = max(x[2] for x in first), max(x[2] for x in last)
            print(f"\nfaults-soak: RSS {rss0} kB -> {rss1} kB, fds {fd0} -> {fd1} "
                  f"(maxima of the first and last {win / 60:.1f} min, samples 60 s or more after an agent start)")
            results.update(rss_kb=[rss0, rss1], fds=[fd0, fd1], window_s=win)
            if rss1 > rss0 * 1.10:
                violation(f"RSS grew: {rss0} kB -> {rss1} kB")
            if fd1 > fd0 * 1.10 + 5:
                violation(f"open fds grew: {fd0} -> {fd1}")
        with open(os.path.join(RUN, "usage.csv"), "w") as f:
            f.write("t_s,rss_kb,fds,since_agent_start_s\n")
            for x in u:
                f.write(f"{x[0]:.1f},{x[1]},{x[2]},{x[3]:.1f}\n")
        print(f"faults-soak: {len(checker.restarts)} restarts not asked for; the agent started "
              f"{agent.starts} times; {churn.actions} churn actions; {checker.samples} runtime samples")
        results["restarts"] = checker.restarts
        n, dt = checker.event_peak
        print(f"faults-soak: {checker.event_writes} event writes; at most {n} between two samples "
              f"({dt:.0f} s apart; the limit {EVENT_QPS}/s, burst {EVENT_BURST})")
        results.update(event_writes=checker.event_writes, event_peak=[n, dt])
    CLIENT.look()
    rotations, near, closest = CLIENT.summary()
    print(f"faults-soak: client certificates: {len(CLIENT.seen)} seen (distinct serials), {rotations} rotations; "
          f"{len(CLIENT.kills)} agent kills checked, {near} of them within 30 s of a rotation"
          + (f" (the closest {closest:.0f} s)" if closest is not None else ""))
    results.update(client_certificates=[{"t": round(t, 1), "serial": sr, "file": f} for t, sr, f in CLIENT.seen],
                   rotations=rotations, kills_checked=len(CLIENT.kills), kills_near_rotation=near)
    agent.kill(signal.SIGTERM)
    # a sanitizer build's reports (ASan aborts, UBSan may go on), leaks at the exit included
    with open(agent.log_path, errors="replace") as f:
        reports = [line.strip() for line in f
                   if "runtime error:" in line or "ERROR: AddressSanitizer" in line
                   or "ERROR: LeakSanitizer" in line]
    for r in reports[:5]:
        violation(f"sanitizer: {r}")
    with open(os.path.join(RUN, "results.json"), "w") as f:
        json.dump(results, f, indent=1)
    if VIOLATIONS:
        print(f"faults-soak: {len(VIOLATIONS)} violations:")
        for t, v in VIOLATIONS[:20]:
            print(f"  [{t:7.1f}] {v}")
        return verdict(False, VIOLATIONS[0][1])
    return verdict(True)


def verdict(ok, what=""):
    print("faults-soak: PASS" if ok else f"faults-soak: FAIL {what}")
    return 0 if ok else 1


if __name__ == "__main__":
    try:
        sys.exit(main())
    except Exception as e:  # the soak's own failure, named as such
        import traceback
        traceback.print_exc()
        sys.exit(verdict(False, f"the soak's driver failed: {type(e).__name__}: {e}"))
