#!/usr/bin/env python3
"""test_cluster.py: the CSI driver under a real kubelet, on a one-node
cluster from upstream parts (tests/fixtures/clusterfix.py: etcd, kube-apiserver,
kube-controller-manager, kube-scheduler, kubelet, kubectl built from the
pinned k8s.io/kubernetes; containerd and runc from Debian), in namespaces
of its own.  The manifests are applied as users apply them: `kubectl apply
-k` of an overlay whose base is deploy/kubernetes, setting what a user
sets (the image tag, the origins on the daemons' container, a short grace
time) and the host network (the node has no pod network: CNI loopback
only).  The images (the driver's from scripts/build-csi-image.sh, the
sidecars, pause, a Python + numpy + safetensors workload) are built here
and imported into containerd; no registry is reached.

- the DaemonSet becomes ready; the registrar registers csi.stfs.io with
  kubelet (`kubectl get csinode` lists it);
- a pod with an inline hf:// volume of the Hub emulator (a gated repo, the
  token from a Secret) reads every tensor equal to the source through the
  safetensors reference; a pod with an s3:// PersistentVolume (ReadOnlyMany,
  bound by the controller-manager) of the tests' Swift, the keys from a
  Secret, the same; a second pod of the hf:// volume starts no second
  daemon; deleting the pods unpublishes (no mount left under kubelet's
  pods), and the daemon goes after its grace time;
- the inline example's init container, `stfs prefetch --wait` from the
  driver's image, returns once the model is cached; the reader then reads;
- faults: the daemon killed with kill -9 (the pod's next read succeeds
  within 5 s); the plugin's pod deleted and made again by the DaemonSet
  (the running pod's mount adopted, still read); kubelet restarted (the
  pod still reads, a new pod mounts); a refused source and a tenant
  without the gated token (the pod's FailedMount event names stfs's reason,
  no daemon starts).

Each step's time is printed.  Root, /dev/fuse and the binaries' build
(tests/csi/cluster/build.sh: a clean machine builds them once) are needed.
STFS_CSI_IMAGE=OUTDIR: the driver's image of an earlier
scripts/build-csi-image.sh OUTDIR (else built now, minutes).
"""
import hashlib
import json
import os
import subprocess
import sys
import time
import traceback

HERE = os.path.dirname(os.path.abspath(__file__))
TESTS_DIR = os.path.dirname(HERE)
sys.path[:0] = [TESTS_DIR + "/fixtures", TESTS_DIR + "/servers"]
import stfstest as T  # noqa: E402
import clusterfix  # noqa: E402

ROOT = os.path.join(TESTS_DIR, "..")
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


def registered():
    r = kc().kubectl("get", "csinode", clusterfix.NODE, "-o", "json",
                     check=False)
    return not r.returncode and "csi.stfs.io" in [
        d["name"] for d in json.loads(r.stdout)["spec"].get("drivers") or []]


# -- the tests, in order: each leaves the cluster as it found it ----------
def test_driver_ready(d):
    """kubectl apply -k of an overlay on deploy/kubernetes; the DaemonSet
    ready, csi.stfs.io on the node's CSINode."""
    t = time.time()
    over = os.path.join(d, "overlay")
    os.makedirs(over)
    patch = [
        {"op": "add", "path": "/spec/template/spec/hostNetwork",
         "value": True},
        {"op": "replace", "path": "/spec/template/spec/containers/1/env",
         "value": [{"name": "HF_ENDPOINT", "value": K["hub"]},
                   {"name": "AWS_ENDPOINT_URL", "value": K["s3"]}]},
        # the daemons' grace time: 3 s, not 5 min, so that a test sees it
        {"op": "test", "path": "/spec/template/spec/containers/0/args/6",
         "value": "--grace=5m"},
        {"op": "replace", "path": "/spec/template/spec/containers/0/args/6",
         "value": "--grace=3s"},
    ]
    with open(os.path.join(over, "kustomization.yaml"), "w") as f:
        json.dump({
            "apiVersion": "kustomize.config.k8s.io/v1beta1",
            "kind": "Kustomization",
            "resources": [os.path.relpath(os.path.join(
                ROOT, "deploy", "kubernetes"), over)],
            "images": [{"name": "stfs-csi", "newTag": version()}],
            "patches": [{"target": {"kind": "DaemonSet",
                                    "name": "stfs-csi-node"},
                         "patch": json.dumps(patch)}]}, f)
    kc().kubectl("apply", "-k", over)
    wait_for("the DaemonSet ready", ds_ready, timeout=180, why=diag)
    step("DaemonSet ready", t)
    t = time.time()
    wait_for("csi.stfs.io in the node's CSINode", registered, timeout=60)
    step("csi.stfs.io registered", t)
    drv = kc().get("csidriver", "csi.stfs.io")
    assert drv["spec"]["attachRequired"] is False, drv


def test_hf_inline(d):
    """An inline hf:// volume of a gated repo, its token from a Secret:
    every tensor equal to the source through safetensors; a second pod
    reuses the daemon; deleting both unpublishes, the daemon goes after
    its grace time."""
    t = time.time()
    apply(reader_pod("hf-a", hf_volume(K["hf_src"])))
    got = wait_read("hf-a")
    assert got == K["hf_want"], (got, K["hf_want"])
    step("pod hf-a read every tensor", t)
    (pid,) = hf_daemons()
    t = time.time()
    apply(reader_pod("hf-b", hf_volume(K["hf_src"])))
    assert wait_read("hf-b") == K["hf_want"]
    step("pod hf-b read, same daemon", t)
    assert hf_daemons() == [pid], stfs_daemons()
    assert len(pod_mounts()) == 2, pod_mounts()
    t = time.time()
    delete_pods("hf-a", "hf-b")
    wait_for("the targets unmounted", lambda: not pod_mounts(),
             why=plugin_log)
    step("pods deleted, unpublished", t)
    t = time.time()
    wait_for("the daemon gone after its grace time",
             lambda: pid not in stfs_daemons(), timeout=60)
    step("daemon gone after its grace", t)


def test_s3_pv(d):
    """An s3:// PersistentVolume (ReadOnlyMany) and its claim, bound by the
    controller-manager, the keys from a Secret: every tensor equal."""
    t = time.time()
    apply({"apiVersion": "v1", "kind": "PersistentVolume",
           "metadata": {"name": "s3-model"},
           "spec": {"capacity": {"storage": "1Gi"},
                    "accessModes": ["ReadOnlyMany"],
                    "persistentVolumeReclaimPolicy": "Retain",
                    "storageClassName": "",
                    "csi": {"driver": "csi.stfs.io",
                            "volumeHandle": "s3-model", "readOnly": True,
                            "volumeAttributes": {
                                "source": K["s3_src"], "options": "repo"},
                            "nodePublishSecretRef": {
                                "name": "s3-keys", "namespace": NS}}}})
    apply({"apiVersion": "v1", "kind": "PersistentVolumeClaim",
           "metadata": {"name": "s3-model", "namespace": NS},
           "spec": {"accessModes": ["ReadOnlyMany"], "storageClassName": "",
                    "volumeName": "s3-model",
                    "resources": {"requests": {"storage": "1Gi"}}}})
    wait_for("the claim bound", lambda: kc().get(
        "pvc", "-n", NS, "s3-model")["status"].get("phase") == "Bound")
    step("PV and PVC bound", t)
    t = time.time()
    apply(reader_pod("s3-a", {"persistentVolumeClaim": {
        "claimName": "s3-model", "readOnly": True}}))
    assert wait_read("s3-a") == K["s3_want"]
    step("pod s3-a read every tensor", t)
    delete_pods("s3-a")
    wait_for("the target unmounted", lambda: not pod_mounts(),
             why=plugin_log)
    kc().kubectl("delete", "pvc", "-n", NS, "s3-model")
    kc().kubectl("delete", "pv", "s3-model")


def test_prefetch_init(d):
    """The inline example's init container: `stfs prefetch --wait` on the
    volume from the driver's image (nobody, no capability) returns once
    the model is cached, then the reader reads every tensor equal."""
    t = time.time()
    pod = reader_pod("warm", hf_volume(K["hf_src"]), stay=False)
    pod["spec"]["initContainers"] = [{
        "name": "warm", "image": "stfs-csi:" + version(),
        "imagePullPolicy": "IfNotPresent",
        "command": ["stfs", "prefetch", "--wait", "/models/m"],
        "securityContext": {"runAsUser": 65534, "runAsNonRoot": True,
                            "allowPrivilegeEscalation": False,
                            "capabilities": {"drop": ["ALL"]}},
        "volumeMounts": [{"name": "model", "mountPath": "/models/m",
                          "readOnly": True}]}]
    apply(pod)
    assert wait_read("warm") == K["hf_want"]
    wait_for("the pod Succeeded", lambda: pod_phase("warm") == "Succeeded")
    st = kc().get("pod", "-n", NS, "warm")["status"]
    (init,) = st["initContainerStatuses"]
    assert init["state"]["terminated"]["exitCode"] == 0, init
    step("init container prefetched, pod read", t)
    delete_pods("warm")
    wait_for("the target unmounted", lambda: not pod_mounts(),
             why=plugin_log)


def test_daemon_kill9(d):
    """kill -9 of the pod's daemon: its next read succeeds within 5 s."""
    apply(reader_pod("k9", hf_volume(K["hf_src"])))
    assert wait_read("k9") == K["hf_want"]
    (pid,) = hf_daemons()
    t = time.time()
    os.kill(pid, 9)
    end = time.time() + 5
    while True:
        got = exec_read("k9")
        if got == K["hf_want"]:
            break
        assert time.time() < end, "no read within 5 s of kill -9: %s" % got
        time.sleep(0.2)
    step("read again after kill -9", t)
    assert pid not in stfs_daemons()
    delete_pods("k9")
    wait_for("the target unmounted", lambda: not pod_mounts(),
             why=plugin_log)


def test_plugin_pod_recreated(d):
    """The plugin's pod deleted (its daemons go with it): the DaemonSet
    makes a new one, which mounts the running pod's volume again when
    kubelet publishes it again with the token; the pod reads again, and a
    new pod mounts."""
    apply(reader_pod("pp", hf_volume(K["hf_src"])))
    assert wait_read("pp") == K["hf_want"]
    (old,) = [p["metadata"]["name"] for p in plugin_pod()]
    t = time.time()
    kc().kubectl("delete", "pod", "-n", "stfs-csi", old, "--wait=true",
                 "--timeout=120s", timeout=180)
    wait_for("a new plugin pod", lambda: [
        p for p in plugin_pod() if p["metadata"]["name"] != old])
    wait_for("the DaemonSet ready again", ds_ready, timeout=180, why=diag)
    wait_for("registered again", registered, timeout=60)
    step("plugin pod made again, ready", t)
    # its daemon went with the old pod: the new plugin mounts it again
    # when kubelet publishes again with the token (requiresRepublish)
    end = time.time() + 60
    while True:
        got = exec_read("pp")
        if got == K["hf_want"]:
            break
        assert time.time() < end, (got, plugin_log())
        time.sleep(1)
    step("the running pod reads again", t)
    apply(reader_pod("pp2", hf_volume(K["hf_src"])))
    assert wait_read("pp2") == K["hf_want"]
    delete_pods("pp", "pp2")
    wait_for("the targets unmounted", lambda: not pod_mounts(),
             why=plugin_log)


def test_kubelet_restart(d):
    """kubelet stopped and started: the pod still reads; a new pod mounts;
    deleting both unpublishes."""
    apply(reader_pod("kr", hf_volume(K["hf_src"])))
    assert wait_read("kr") == K["hf_want"]
    t = time.time()
    kc().stop_kubelet()
    assert exec_read is not None
    kc().start_kubelet()
    wait_for("the DaemonSet ready again", ds_ready, timeout=180, why=diag)
    step("kubelet restarted, node Ready", t)
    got = exec_read("kr")
    assert got == K["hf_want"], got
    apply(reader_pod("kr2", hf_volume(K["hf_src"])))
    assert wait_read("kr2") == K["hf_want"]
    delete_pods("kr", "kr2")
    wait_for("the targets unmounted", lambda: not pod_mounts(),
             why=plugin_log)


def failed_mount(name, says, timeout=120):
    """The pod's FailedMount event with says in its message."""
    end = time.time() + timeout
    while time.time() < end:
        for reason, msg in events(name):
            if reason == "FailedMount" and says in msg:
                return msg
        time.sleep(0.5)
    raise AssertionError("%s: no FailedMount naming %r: %s" % (
        name, says, events(name)))


def test_refused(d):
    """A tenant without the gated repo's token (a wrong one) and a source
    that does not exist: FailedMount events with stfs's reason, the pod
    never runs, no daemon starts; the token in no event."""
    apply({"apiVersion": "v1", "kind": "Secret",
           "metadata": {"name": "other-token", "namespace": NS},
           "stringData": {"HF_TOKEN": "hf_other_tenant_never_shown"}})
    before = set(stfs_daemons())
    apply(reader_pod("no-token", hf_volume(K["hf_src"], "other-token")))
    apply(reader_pod("missing", hf_volume(
        "hf://org/none@" + "0" * 40)))
    t = time.time()
    msg = failed_mount("no-token", "restricted")
    assert "hf_other_tenant_never_shown" not in msg, msg
    failed_mount("missing", "stfs:")
    step("refusals as FailedMount events", t)
    for n in ("no-token", "missing"):
        assert pod_phase(n) == "Pending", pod_phase(n)
    started = set(stfs_daemons()) - before    # (one in its grace may end)
    assert not started, {p: status_of(p) for p in started}
    assert not pod_mounts(), pod_mounts()
    delete_pods("no-token", "missing")


TESTS = [test_driver_ready, test_hf_inline, test_s3_pv, test_prefetch_init,
         test_daemon_kill9,
         test_plugin_pod_recreated, test_kubelet_restart, test_refused]


def run(r, fn, d):
    """T.Runner.run without its cleanup after each test, which would stop
    the servers every test here shares."""
    t = time.time()
    try:
        fn(d)
    except Exception as e:
        r.failed += 1
        print("FAIL %s: %s" % (fn.__name__, e), flush=True)
        traceback.print_exc(file=sys.stdout)
    else:
        r.passed += 1
        print("ok   %s (%.2fs)" % (fn.__name__, time.time() - t), flush=True)
    finally:    # what a failed test left: its pods
        kc().kubectl("delete", "pods", "--all", "-n", NS, "--wait=true",
                     "--timeout=60s", check=False, timeout=90)


def csi_image(d):
    """The driver's OCI archive: STFS_CSI_IMAGE's, or built now in d."""
    out = os.environ.get("STFS_CSI_IMAGE")
    if not out:
        out = os.path.join(d, "csi-image")
        t = time.time()
        r = subprocess.run(["bash", os.path.join(ROOT, "scripts",
                                                 "build-csi-image.sh"), out],
                           capture_output=True, timeout=2400)
        assert r.returncode == 0, r.stderr.decode()[-3000:]
        step("the driver's image built", t)
    return os.path.join(out, "stfs-csi.oci.tar")


def main():
    T.require_fuse()
    if not clusterfix.inside():
        # what needs the machine's network (the Go module proxy, Debian's
        # mirror), before the namespaces, which have none
        built = None
        if not os.environ.get("STFS_CSI_IMAGE"):
            built = T.tmpdir()
            os.environ["STFS_CSI_IMAGE"] = os.path.dirname(csi_image(built))
        try:
            clusterfix.binaries()
            clusterfix.enter()      # runs main again inside, exits
        finally:
            if built:
                subprocess.run(["rm", "-rf", built])
    clusterfix.enter()          # inside: the namespaces' network up
    from fixtures import World
    import hubemu
    import s3server
    base = T.tmpdir()
    os.chmod(base, 0o755)
    r = T.Runner()
    w = c = None
    only = sys.argv[1:]
    try:
        t0 = time.time()
        image = csi_image(base)
        w = World(os.path.join(base, "world"))
        data, want = model_bytes(1, base)
        sha = w.hub.push(w.hub.repo("org/gated", gated=True),
                         {"model.safetensors": data,
                          "config.json": b'{"model_type": "llama"}'})
        sw = s3server.shared()
        data2, want2 = model_bytes(2, base)
        sw.put("models", "cluster/model.safetensors", data2)
        K.update(hub=w.hub.url, s3=sw.endpoint,
                 hf_src="hf://org/gated@" + sha, hf_want=want,
                 s3_src="s3://models/cluster/", s3_want=want2)
        step("sources (Hub emulator, Swift)", t0)
        c = K["cluster"] = clusterfix.Cluster(os.path.join(base, "cluster"),
                                              images=[image])
        apply({"apiVersion": "v1", "kind": "Secret",
               "metadata": {"name": "hf-token", "namespace": NS},
               "stringData": {"HF_TOKEN": hubemu.TOKEN}})
        apply({"apiVersion": "v1", "kind": "Secret",
               "metadata": {"name": "s3-keys", "namespace": NS},
               "stringData": {"AWS_ACCESS_KEY_ID": s3server.ACCESS,
                              "AWS_SECRET_ACCESS_KEY": s3server.SECRET}})
        for fn in TESTS:
            if only and fn.__name__ not in only and \
                    fn is not test_driver_ready:
                continue
            d = os.path.join(base, fn.__name__)
            os.mkdir(d)
            run(r, fn, d)
    except Exception as e:
        r.failed += 1
        print("FAIL setup: %s" % e, flush=True)
        if c is not None:
            for n in ("kubelet", "containerd"):
                print(c.logtail(n, 3000))
    finally:
        t = time.time()
        if c is not None:
            c.stop()
        if w is not None:
            w.close()
        s3server.stop_shared()
        step("stopped", t)
        print("  total %.1f s" % (time.time() - t0), flush=True)
        subprocess.run(["rm", "-rf", base])
    return r.finish()


if __name__ == "__main__":
    sys.exit(main())
