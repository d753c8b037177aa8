"""clusterpods.py: the helpers of tests/test_cluster.py (its cases stay
there): the pods it makes and reads through kubectl, the processes and
mounts of the node it looks at, kubelet's registration of the plugin, its
/healthz and kubelet's liveness probes of it, and the waits on them.  K
holds what test_cluster.py's main() sets up: the cluster, the sources,
what each source's tensors hash to."""
import hashlib
import json
import os
import time

import clusterfix
import stfstest as T

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.join(HERE, "..")
NS = "default"
K = {}          # the cluster, the world, the sources: set up by main()

READER = r'''
import hashlib, json, os, sys, time
from safetensors.numpy import load_file
root, name = sys.argv[1], sys.argv[2]
ref = load_file(os.path.join(root, name))
out = {}
for t, arr in sorted(ref.items()):
    with open(os.path.join(root, "%tensors", *t.split(".")), "rb") as f:
        got = f.read()
    if got != arr.tobytes():
        sys.exit("tensor %s differs from the safetensors reference" % t)
    out[t] = hashlib.sha256(got).hexdigest()
print("READ " + json.dumps(out, sort_keys=True), flush=True)
while "--stay" in sys.argv:
    time.sleep(3600)
'''


def version():
    with open(os.path.join(ROOT, "meson.build")) as f:
        for line in f:
            if line.strip().startswith("version:"):
                return line.split("'")[1]
    raise AssertionError("no version in meson.build")


def tensors(seed):
    """A small model: a few F32 tensors, their bytes by name."""
    import random
    rnd = random.Random(seed)
    return [("model.layers.%d.w" % i, "F32", [64, 32],
             bytes(rnd.getrandbits(8) for _ in range(64 * 32 * 4)))
            for i in range(3)]


def model_bytes(seed, d):
    path = os.path.join(d, "m%d.safetensors" % seed)
    ts = tensors(seed)
    T.write_st(path, ts)
    with open(path, "rb") as f:
        data = f.read()
    return data, {n: hashlib.sha256(b).hexdigest() for n, _, _, b in ts}


def step(name, t0):
    print("  step %-40s %6.1f s" % (name, time.time() - t0), flush=True)


def kc():
    return K["cluster"]


def apply(doc):
    kc().kubectl("apply", "-f", "-", input=json.dumps(doc))


def reader_pod(name, volume, stay=True, mname="model.safetensors"):
    argv = ["python3", "-c", READER, "/models/m", mname]
    if stay:
        argv.append("--stay")
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": name, "namespace": NS},
            "spec": {"restartPolicy": "Never",
                     "terminationGracePeriodSeconds": 1,
                     "containers": [{
                         "name": "reader", "image": "stfs.test/workload:1",
                         "imagePullPolicy": "Never", "command": argv,
                         "volumeMounts": [{
                             "name": "model", "mountPath": "/models/m",
                             "readOnly": True,
                             "mountPropagation": "HostToContainer"}]}],
                     "volumes": [dict(volume, name="model")]}}


def hf_volume(source, secret="hf-token"):
    return {"csi": {"driver": "csi.stfs.io", "readOnly": True,
                    "volumeAttributes": {"source": source,
                                         "options": "repo"},
                    "nodePublishSecretRef": {"name": secret}}}


def pod_phase(name):
    r = kc().kubectl("get", "pod", name, "-n", NS, "-o", "json",
                     check=False)
    return json.loads(r.stdout)["status"].get("phase") if not r.returncode \
        else None


def wait_read(name, timeout=180):
    """The READ line of the pod's log: {tensor: sha256}."""
    end = time.time() + timeout
    while time.time() < end:
        r = kc().kubectl("logs", name, "-n", NS, check=False)
        for line in r.stdout.splitlines():
            if line.startswith("READ "):
                return json.loads(line[5:])
        if pod_phase(name) == "Failed":
            raise AssertionError("pod %s failed: %s" % (name, r.stdout))
        time.sleep(0.5)
    raise AssertionError("pod %s: no read within %d s: %s\nevents: %s" % (
        name, timeout, r.stdout + r.stderr, events(name)))


def exec_read(name, mname="model.safetensors"):
    """The reader run again in the pod (kubectl exec): {tensor: sha256},
    else what it said."""
    end = time.time() + 30
    while True:
        r = kc().kubectl("exec", name, "-n", NS, "--", "python3", "-c",
                         READER, "/models/m", mname, check=False, timeout=60)
        for line in r.stdout.splitlines():
            if line.startswith("READ "):
                return json.loads(line[5:])
        # kubectl's own errors (a kubelet that does not serve yet, or has
        # not seen the pod yet) are waited out; the reader's are answers
        if "command terminated" in r.stderr or time.time() > end:
            return r.stdout + r.stderr
        time.sleep(0.5)


def events(name):
    r = kc().kubectl("get", "events", "-n", NS, "--field-selector",
                     "involvedObject.name=" + name, "-o", "json",
                     check=False)
    if r.returncode:
        return []
    return [(e.get("reason"), e.get("message", ""))
            for e in json.loads(r.stdout)["items"]]


def delete_pods(*names):
    kc().kubectl("delete", "pod", "-n", NS, "--wait=true", "--timeout=120s",
                 *names, timeout=180)


def stfs_daemons():
    """The stfs daemons of the node (this PID namespace's): pid: argv."""
    out = {}
    for p in os.listdir("/proc"):
        if not p.isdigit():
            continue
        try:
            with open("/proc/%s/cmdline" % p, "rb") as f:
                argv = f.read().split(b"\0")
        except OSError:
            continue
        if argv[0].endswith(b"/stfs") and b"mount" in argv[1:2]:
            out[int(p)] = argv
    return out


def status_of(pid):
    """A process's argv, parent and state: for a failure message."""
    try:
        with open("/proc/%d/status" % pid) as f:
            st = dict(ln.split(":", 1) for ln in f if ":" in ln)
        with open("/proc/%d/cmdline" % pid, "rb") as f:
            argv = f.read().split(b"\0")
        return argv, st["PPid"].strip(), st["State"].strip()
    except OSError as e:
        return str(e)


def hf_daemons():
    """The daemons of the hf:// source (one, else the assertion says)."""
    out = [p for p, a in stfs_daemons().items()
           if K["hf_src"].encode() in a]
    assert len(out) == 1, {p: status_of(p) for p in out}
    return out


def pod_mounts():
    """The fuse mounts under kubelet's pods (the published targets)."""
    with open("/proc/self/mountinfo") as f:
        return [ln.split()[4] for ln in f
                if ln.split()[4].startswith("/var/lib/kubelet/pods/")
                and " - fuse" in ln]


def diag():
    """What the cluster says of the driver's pods: for a failure message."""
    r = kc().kubectl("describe", "pods", "-n", "stfs-csi", check=False)
    return r.stdout[-6000:] + r.stderr[-1000:] + plugin_log()


def plugin_log():
    r = kc().kubectl("logs", "-n", "stfs-csi", "-c", "plugin",
                     "daemonset/stfs-csi-node", "--tail=40", check=False)
    return "\nthe plugin's log:\n" + r.stdout[-5000:] + r.stderr[-500:]


def wait_for(what, cond, timeout=60, why=None):
    end = time.time() + timeout
    while not cond():
        if time.time() > end:
            raise AssertionError(what + ": not within %d s%s" % (
                timeout, ("\n" + why()) if why else ""))
        time.sleep(0.2)


def plugin_pod():
    pods = kc().get("pods", "-n", "stfs-csi", "-l",
                    "app.kubernetes.io/name=stfs-csi-node")["items"]
    return [p for p in pods if not p["metadata"].get("deletionTimestamp")]


def ds_ready():
    ds = kc().get("daemonset", "-n", "stfs-csi", "stfs-csi-node")
    st = ds["status"]
    return st.get("desiredNumberScheduled") == 1 and \
        st.get("numberReady") == 1 and \
        st.get("updatedNumberScheduled") == 1


def registrations():
    """How often the plugin's log says kubelet registered it, per plugin
    pod: {pod: n}."""
    out = {}
    for p in plugin_pod():
        n = p["metadata"]["name"]
        r = kc().kubectl("logs", "-n", "stfs-csi", n, "-c", "plugin",
                         check=False)
        out[n] = r.stdout.count("kubelet registered csi.stfs.io at "
                                "/var/lib/kubelet/plugins/csi.stfs.io/"
                                "csi.sock")
    return out


def healthz():
    """The plugin's /healthz (host network: this namespace's 9808)."""
    import urllib.error
    import urllib.request
    try:
        with urllib.request.urlopen("http://127.0.0.1:9808/healthz",
                                    timeout=10) as r:
            return r.status, r.read().decode()
    except urllib.error.HTTPError as e:
        return e.code, e.read().decode()
    except OSError as e:
        return None, str(e)


def probes(container):
    """kubelet's prober_probe_total of a container's liveness probe, by
    result (kubelet's /metrics/probes through the API server's proxy)."""
    r = kc().kubectl("get", "--raw", "/api/v1/nodes/%s/proxy/metrics/probes"
                     % clusterfix.NODE, check=False)
    out = {}
    for line in r.stdout.splitlines():
        if line.startswith("prober_probe_total{") and \
                'container="%s"' % container in line and \
                'probe_type="Liveness"' in line:
            res = line.split('result="')[1].split('"')[0]
            out[res] = out.get(res, 0) + float(line.split()[-1])
    return out


def registered():
    r = kc().kubectl("get", "csinode", clusterfix.NODE, "-o", "json",
                     check=False)
    return not r.returncode and "csi.stfs.io" in [
        d["name"] for d in json.loads(r.stdout)["spec"].get("drivers") or []]


def plugin_pids():
    """The plugin's processes (stfs-csi, not its launcher)."""
    out = []
    for p in os.listdir("/proc"):
        try:
            with open("/proc/%s/cmdline" % p, "rb") as f:
                argv = f.read().split(b"\0")
        except OSError:
            continue
        if argv[0].endswith(b"/stfs-csi") and b"daemon" not in argv[1:2]:
            out.append(int(p))
    return out


def plugin_restarts():
    (pod,) = plugin_pod()
    return {c["name"]: c["restartCount"]
            for c in pod["status"].get("containerStatuses", [])}
