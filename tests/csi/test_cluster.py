#!/usr/bin/env python3
"""test_cluster.py: the CSI driver under a real kubelet, on a one-node
cluster from upstream parts (tests/fixtures/clusterfix.py: etcd, kube-apiserver,
kube-controller-manager, kube-scheduler, kubelet, kubectl built from the
pinned k8s.io/kubernetes; containerd and runc from Debian), in namespaces
of its own.  The manifests are applied as users apply them: `kubectl apply
-k` of an overlay whose base is deploy/kubernetes, setting what a user
sets (the image tag, the origins on the daemons' container, a short grace
time) and the host network (the node has no pod network: CNI loopback
only).  The images (the driver's from scripts/build-csi-image.sh, pause,
a Python + numpy + safetensors workload) are built here and imported into
containerd; no registry is reached.  The DaemonSet has no sidecar.

- the DaemonSet becomes ready; the plugin itself answers kubelet's plugin
  registration (its socket in plugins_registry; `kubectl get csinode`
  lists csi.stfs.io) and its own /healthz, which kubelet's liveness probe
  asks;
- a pod with an inline hf:// volume of the Hub emulator (a gated repo, the
  token from a Secret) reads every tensor equal to the source through the
  safetensors reference; a pod with an s3:// PersistentVolume (ReadOnlyMany,
  bound by the controller-manager) of the tests' Swift, the keys from a
  Secret, the same; a second pod of the hf:// volume starts no second
  daemon; deleting the pods unpublishes (no mount left under kubelet's
  pods), and the daemon goes after its grace time (not before);
- the inline example's init container, `stfs prefetch --wait` from the
  driver's image, returns once the model is cached; the reader then reads;
- faults: the daemon killed with kill -9 (the pod's next read succeeds
  within 5 s); the plugin's container killed (kubelet starts it again, it
  adopts the running daemon, the pod reads on through it); the plugin's pod deleted and made again by the DaemonSet
  (the running pod's mount adopted, still read); kubelet restarted (the
  pod reads through its mount while kubelet is down, kubelet registers
  the plugin again, a new pod mounts); refusals (a tenant with a wrong
  token and one with none for the gated repo, a repo that does not exist, a
  host --allow-hosts refuses): each pod's FailedMount event names the
  reason, no daemon stays (the refused host starts none; each of kubelet's
  attempts at the others starts one to ask the origin, which exits).

The helpers (pods, kubectl, the node's processes and mounts, the waits)
are in tests/fixtures/clusterpods.py.  Each step's time is printed.  Root,
/dev/fuse and the binaries' build (tests/csi/cluster/build.sh: a clean machine
builds them once) are needed.
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
from clusterpods import (  # noqa: E402
    apply, delete_pods, diag, ds_ready, events, exec_read, healthz,
    hf_daemons, hf_volume, kc, model_bytes, plugin_log, plugin_pids,
    plugin_pod, plugin_restarts, pod_mounts, pod_phase, probes, reader_pod,
    registered, registrations, status_of, step, stfs_daemons, version,
    wait_for, wait_read, K, NS, ROOT)


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
    # no sidecar: the plugin answered kubelet's registration itself, on
    # its socket in kubelet's plugins_registry
    (pod,) = plugin_pod()
    names = sorted(c["name"] for c in pod["spec"]["containers"])
    assert names == ["daemons", "plugin"], names
    assert os.listdir("/var/lib/kubelet/plugins_registry") == [
        "csi.stfs.io-reg.sock"], os.listdir("/var/lib/kubelet/plugins_registry")
    assert list(registrations().values()) == [1], (registrations(),
                                                   plugin_log())
    assert healthz() == (200, "ok\n"), healthz()


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
    t = t_del = time.time()
    delete_pods("hf-a", "hf-b")
    wait_for("the targets unmounted", lambda: not pod_mounts(),
             why=plugin_log)
    step("pods deleted, unpublished", t)
    t = time.time()
    wait_for("the daemon gone after its grace time",
             lambda: pid not in stfs_daemons(), timeout=60)
    # the last unpublish came after t_del: the daemon may not end sooner
    # than the overlay's --grace=3s after it
    assert time.time() - t_del >= 3.0, time.time() - t_del
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


def test_liveness(d):
    """The plugin's own /healthz, asked by kubelet's liveness probe (the
    manifest's, no livenessprobe sidecar): kubelet counts successful
    probes of the plugin's container, no failed one, no restart."""
    t = time.time()
    wait_for("kubelet's liveness probe of the plugin succeeded",
             lambda: probes("plugin").get("successful", 0) >= 1,
             timeout=90, why=lambda: str(probes("plugin")))
    got = probes("plugin")
    assert not got.get("failed") and not got.get("unknown"), got
    (pod,) = plugin_pod()
    for c in pod["status"]["containerStatuses"]:
        assert c["restartCount"] == 0, c
    assert healthz() == (200, "ok\n"), healthz()
    step("kubelet's liveness probe ok", t)


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


def test_plugin_restart_adopts(d):
    """The plugin's container killed (kill -9, as a crash or a failed
    liveness probe ends it): kubelet starts it again in the same pod; the
    daemons' container lives on, so the new plugin adopts the running
    daemon (its log says so), kubelet registers it again, the pod reads on
    through the same daemon, and a new pod of the volume shares it."""
    apply(reader_pod("ad", hf_volume(K["hf_src"])))
    assert wait_read("ad") == K["hf_want"]
    (pid,) = hf_daemons()
    (plug,) = plugin_pids()
    t = time.time()
    os.kill(plug, 9)
    wait_for("the plugin's container started again", lambda:
             plugin_restarts().get("plugin") == 1 and ds_ready(),
             timeout=120, why=diag)
    wait_for("kubelet registered the new plugin",
             lambda: list(registrations().values()) == [1], timeout=60,
             why=lambda: str(registrations()) + plugin_log())
    step("plugin container restarted", t)
    full = kc().kubectl("logs", "-n", "stfs-csi", "-c", "plugin",
                        "daemonset/stfs-csi-node").stdout
    assert "adopted 1 daemons of a previous run" in full, full[-5000:]
    assert plugin_restarts().get("daemons") == 0, plugin_restarts()
    assert hf_daemons() == [pid], stfs_daemons()
    assert exec_read("ad") == K["hf_want"]
    apply(reader_pod("ad2", hf_volume(K["hf_src"])))
    assert wait_read("ad2") == K["hf_want"]
    assert hf_daemons() == [pid], stfs_daemons()
    step("adopted daemon read by both pods", t)
    delete_pods("ad", "ad2")
    wait_for("the targets unmounted", lambda: not pod_mounts(),
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
    # the new plugin's own socket: kubelet registered it
    wait_for("kubelet registered the new plugin",
             lambda: list(registrations().values()) == [1], timeout=60,
             why=lambda: str(registrations()) + plugin_log())
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
    before = registrations()
    t = time.time()
    kc().stop_kubelet()
    # kubelet down: the pod's mount (its published target) still reads
    (target,) = pod_mounts()
    got = {}
    for n in K["hf_want"]:
        with open(os.path.join(target, "%tensors", *n.split(".")),
                  "rb") as f:
            got[n] = hashlib.sha256(f.read()).hexdigest()
    assert got == K["hf_want"], got
    kc().start_kubelet()
    wait_for("the DaemonSet ready again", ds_ready, timeout=180, why=diag)
    step("kubelet restarted, node Ready", t)
    # the new kubelet found the plugin's socket and registered it again
    wait_for("kubelet registered the plugin again", lambda: {
        k: v - 1 for k, v in registrations().items()} == before,
        timeout=60, why=lambda: str((before, registrations())))
    got = exec_read("kr")
    assert got == K["hf_want"], got
    apply(reader_pod("kr2", hf_volume(K["hf_src"])))
    assert wait_read("kr2") == K["hf_want"]
    delete_pods("kr", "kr2")
    wait_for("the targets unmounted", lambda: not pod_mounts(),
             why=plugin_log)


def test_refused(d):
    """Refusals: a tenant with a wrong token for the gated repo, one with
    no token, a repo that does not exist, a host the plugin's
    --allow-hosts refuses (a private address): each pod's FailedMount
    event names the reason, the pod never runs, the token is in no event.
    No daemon stays: the refused host starts none; for the others each of
    kubelet's attempts starts one to ask the origin, which exits with the
    origin's refusal."""
    apply({"apiVersion": "v1", "kind": "Secret",
           "metadata": {"name": "other-token", "namespace": NS},
           "stringData": {"HF_TOKEN": "hf_other_tenant_never_shown"}})
    before = set(stfs_daemons())
    anon = hf_volume(K["hf_src"])
    del anon["csi"]["nodePublishSecretRef"]
    pods = {"no-token": (hf_volume(K["hf_src"], "other-token"),
                         "restricted"),
            "anon": (anon, "restricted"),
            # (the Hub answers 401 for a repo it does not have, as
            # huggingface.co does; stfs passes its words on)
            "missing": (hf_volume("hf://org/none@" + "0" * 40),
                        "Repository Not Found"),
            "private-host": ({"csi": {
                "driver": "csi.stfs.io", "readOnly": True,
                "volumeAttributes": {
                    "source": "https://10.11.12.13/m.safetensors"}}},
                "refused by this node (the plugin's --allow-hosts)")}
    for n, (vol, _) in pods.items():
        apply(reader_pod(n, vol))
    t = time.time()
    got, seen = {}, {}  # the events; the daemons seen meanwhile
    end = time.time() + 120
    while len(got) < len(pods):
        assert time.time() < end, "no FailedMount naming why: %s" % {
            n: events(n) for n in pods if n not in got}
        seen.update((p, a) for p, a in stfs_daemons().items()
                    if p not in before)
        for n, (_, says) in pods.items():
            for reason, msg in events(n) if n not in got else ():
                if reason == "FailedMount" and says in msg:
                    got[n] = msg
        time.sleep(0.2)
    for msg in got.values():
        assert "hf_other_tenant_never_shown" not in msg, msg
    step("refusals as FailedMount events", t)
    for n in pods:
        assert pod_phase(n) == "Pending", pod_phase(n)
    assert not [a for a in seen.values() if b"10.11.12.13" in b" ".join(a)], \
        seen
    # (one of before, in its grace time, may end meanwhile)
    wait_for("no daemon of a refused volume left",
             lambda: not set(stfs_daemons()) - before, timeout=60,
             why=lambda: str({p: status_of(p)
                              for p in set(stfs_daemons()) - before}))
    assert not pod_mounts(), pod_mounts()
    delete_pods(*pods)


TESTS = [test_driver_ready, test_hf_inline, test_s3_pv, test_liveness,
         test_prefetch_init,
         test_daemon_kill9, test_plugin_restart_adopts,
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
