#!/usr/bin/env python3
"""test_csi.py: the Kubernetes CSI driver (csi/), end to end without a
cluster, with real mounts.

The driver's Go module is built here with `go build` (offline: its
modules come from the cache scripts/deps.sh fills).  The plugin
(`stfs-csi`, root) and the launcher (`stfs-csi daemon`, which drops to
nobody) run as separate processes; kubelet's part is played by
csi/test/csicall (one gRPC call, secrets on its stdin) and a "pod" is a
process in its own mount namespace whose mounts are slaves of the node's
(unshare --propagation slave), reading under a kubelet directory that is
a shared mount, as kubelet's is.

- csi-sanity (kubernetes-csi/csi-test, pinned in csi/go.sum) against the
  driver's socket;
- a local model published to two pods: they read its tensors and %repo/
  files equal to the source; the second publish starts no second daemon;
  the daemon runs as nobody with CapEff 0; publish is idempotent, another
  volume on a used target is ALREADY_EXISTS;
- kill -9 of the daemon: the pod reads again within 5 s, with no restart;
- the last unpublish removes the targets and unmounts the daemon after
  the grace time; the daemon exits;
- refusals with the spec's codes: writer modes, block, an hf:// branch,
  options a pod may not set, secrets that are not stfs's, a source that
  stfs refuses (its own words), threads=/connections= over the node's
  caps, and nothing left mounted or running;
- --allow-hosts: loopback hosts (by address, name, IPv4-mapped) refused
  by default, numeric forms that are not a dotted quad refused, nothing
  asked of the server; an explicit address served, its daemon run with
  stfs's -o public_net, which refuses a redirect to 127.0.0.2;
- --max-daemons=1: ResourceExhausted while the daemon has a pod, an idle
  one stopped to make room;
- hf:// (the Hub emulator) with a token from the secret: the pod reads
  the gated repository's files; a wrong token is refused; the token is in
  no process's argv, no file and no log, only in the daemon's environment;
- s3:// (Swift) with AWS keys from the secret, the same; a wrong key and
  a user without access are refused with S3's reasons;
- a restart of the plugin: the daemons adopted, recovered, shared;
- two sources on one node: one cache, each pod its own files; the
  readiness check (stfs prefetch --wait on the volume);
- allowOfflineCache: a gated hf:// source read once online; with the Hub
  stopped, a volume that allows it is served from the node cache by an
  offline daemon of its own (the tensor read before, equal to the source;
  one never read is EIO); without it, or with a source never cached, the
  publish is refused; a token the Hub refuses is refused even with it;
- a `mirror` attribute with the mirror's own keys (STFS_MIRROR_AWS_* in
  the secret): every tensor equal, the Hub and its CDN asked nothing, the
  keys in no argv, file or log; without them the bucket is not read; the
  origin's AWS keys with a mirror and none of its own: refused.
"""
import hashlib
import json
import os
import signal
import subprocess
import sys
import threading
import time

TESTS_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path[:0] = [TESTS_DIR + "/fixtures", TESTS_DIR + "/servers"]
import stfstest as T  # noqa: E402
from csifix import (GO, NOBODY, POD, Node, bins, model,  # noqa: E402
                    mounts_under, pod_read, sha, status, wait_dead)
from fixtures import Nginx, World, free_port  # noqa: E402
import hubemu  # noqa: E402
import s3server  # noqa: E402

SECRET = "hf_csi_secret_never_shown_1234"


def no_secret_anywhere(node, secret, daemon_pids=()):
    """secret: in no process's argv, no file under the node's folders (its
    logs included), and in the environment of the daemons only."""
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            with open("/proc/%s/cmdline" % pid, "rb") as f:
                argv = f.read()
            assert secret.encode() not in argv, "argv of %s: %r" % (
                pid, argv.replace(secret.encode(), b"<SECRET>")[:300])
        except OSError:
            pass
    for p in (node.plugin.pid, node.launcher.pid):
        with open("/proc/%d/environ" % p, "rb") as f:
            assert secret.encode() not in f.read(), "environ of %d" % p
    for top, dirs, files in os.walk(node.d):
        dirs[:] = [x for x in dirs
                   if not os.path.ismount(os.path.join(top, x))]
        for n in files:
            p = os.path.join(top, n)
            if os.path.islink(p) or not os.path.isfile(p):
                continue
            with open(p, "rb") as f:
                assert secret.encode() not in f.read(), p
    for pid in daemon_pids:
        with open("/proc/%d/environ" % pid, "rb") as f:
            assert secret.encode() in f.read(), "the daemon's environment"


def test_sanity(d):
    with Node(d) as node:
        mnt = os.path.join(d, "sanity")
        os.mkdir(mnt)
        r = subprocess.run(
            [bins()["csi-sanity"], "--csi.endpoint", node.sock,
             "--csi.mountdir", mnt + "/mount",
             "--csi.stagingdir", mnt + "/staging",
             # no controller: csi-sanity's controller tests do not apply;
             # its only success path of NodePublish asks for
             # SINGLE_NODE_WRITER, read-write, which a read-only driver
             # refuses; the publish tests below cover it
             "--ginkgo.skip", "Controller Server|should remove target path",
             "--ginkgo.no-color"],
            capture_output=True, timeout=300)
        out = r.stdout.decode()
        assert r.returncode == 0, out[-4000:] + r.stderr.decode()[-2000:]
        tail = [x for x in out.splitlines() if "Passed" in x]
        print("   csi-sanity:", tail[-1].strip() if tail else out[-300:])


def test_publish_two_pods(d):
    src, want = model(d)
    with Node(d) as node:
        t = time.time()
        r = node.publish("pod-a", {"source": src, "options": "npy"},
                         {"HF_TOKEN": SECRET})
        first = time.time() - t
        assert r["code"] == "OK", r
        pids = node.daemons()
        assert len(pids) == 1, pids
        st = status(pids[0])
        assert st["Uid"] == [str(NOBODY)] * 4 and \
            st["Gid"] == [str(NOBODY)] * 4, st
        assert int(st["CapEff"][0], 16) == 0, st["CapEff"]
        assert int(st["CapPrm"][0], 16) == 0, st["CapPrm"]
        assert pod_read(node.target("pod-a"), list(want)) == want
        # a second pod: the same daemon, bound again
        r2 = node.publish("pod-b", {"source": src, "options": "npy"},
                          {"HF_TOKEN": SECRET}, vid="vol-2")
        assert r2["code"] == "OK", r2
        assert node.daemons() == pids
        assert pod_read(node.target("pod-b"), list(want)) == want
        print("   publish: first %.3f s (daemon start), second %.3f s "
              "(call %.3f s)" % (first, r2["seconds"], r2["seconds"]))
        # the same again is the same answer; another volume there is not
        assert node.publish("pod-a", {"source": src, "options": "npy"},
                            {"HF_TOKEN": SECRET})["code"] == "OK"
        r = node.publish("pod-a", {"source": src}, vid="vol-3")
        assert r["code"] == "AlreadyExists", r
        # read-only, for root too
        try:
            open(os.path.join(node.target("pod-a"), "x"), "wb")
        except OSError as e:
            assert e.errno in (30, 13), e
        else:
            raise AssertionError("a write was allowed")
        # other credentials: another daemon
        r = node.publish("pod-c", {"source": src, "options": "npy"},
                         vid="vol-4")
        assert r["code"] == "OK" and len(node.daemons()) == 2, r
        no_secret_anywhere(node, SECRET, pids)
        for pod, vid in (("pod-a", "vol-1"), ("pod-b", "vol-2"),
                         ("pod-c", "vol-4")):
            assert node.unpublish(pod, vid)["code"] == "OK"


def _back(pod, killed, dead):
    """Seconds from kill -9 to the follow pod's first good read after
    the daemon was gone, and the reads that failed meanwhile."""
    errors = 0
    while time.time() < killed + 10:
        line = pod.stdout.readline().decode().split()
        if float(line[1]) <= dead:
            continue
        if line[0] == "err":
            errors += 1
        else:
            return float(line[1]) - killed, errors
    return None, errors


def test_recovery(d):
    """kill -9 of the daemon: a pod whose namespace is a slave of the
    node's, and a pod that holds only a bind of the target made a slave
    of it (as runc mounts a kubelet volume with HostToContainer), both
    read again within 5 s."""
    src, want = model(d)
    croot = os.path.join(d, "container-mnt")
    os.mkdir(croot)
    with Node(d, grace="30s") as node:
        assert node.publish("pod-a", {"source": src})["code"] == "OK"
        pods = [subprocess.Popen(
            ["unshare", "-m", "--propagation", "slave", sys.executable,
             "-c", POD, node.target("pod-a"), "follow", "model/layers/0/w"],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE),
            subprocess.Popen(
            ["unshare", "-m", "--propagation", "slave", "sh", "-c",
             'mount --rbind "$1" "$2" && mount --make-rslave "$2" && '
             'exec "$3" -c "$4" "$2" follow model/layers/0/w', "pod",
             node.target("pod-a"), croot, sys.executable, POD],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE)]
        T._procs.extend(pods)
        try:
            for pod in pods:
                first = pod.stdout.readline().decode().split()
                assert first[0] == "ok", (first, pod.stderr.read())
            old = node.daemons()
            assert len(old) == 1
            killed = time.time()
            os.kill(old[0], signal.SIGKILL)
            # once it is gone its mount answers ENOTCONN: a read that
            # works after that comes from the new mount (whose device
            # number may be the old one's again)
            dead = wait_dead(old[0])
            for what, pod in zip(("namespace", "container"), pods):
                back, errors = _back(pod, killed, dead)
                assert back is not None and back <= 5, (what, back)
                print("   recovery: the %s pod reads again %.2f s after "
                      "kill -9 (%d reads failed meanwhile)" % (
                          what, back, errors))
            new = node.daemons()
            assert len(new) == 1 and new != old, (old, new)
            assert pod_read(node.target("pod-a"), list(want)) == want
        finally:
            for pod in pods:
                pod.kill()
                pod.wait()
                pod.stdout.close()
                pod.stderr.close()
        assert "mounting " + src + " again" in node.log("plugin")
        # unpublish takes the dead mount under the live one off too
        assert node.unpublish("pod-a")["code"] == "OK"
        assert not mounts_under(os.path.dirname(node.target("pod-a")))


def test_plugin_restart(d):
    """An upgrade of the plugin: the pods read on, and the new plugin
    takes the daemons over (unpublish, sharing, recovery); credentials
    that went with the old one come back with the next publish."""
    src, want = model(d)
    with Node(d, grace="30s") as node:
        assert node.publish("pod-a", {"source": src}, {"HF_TOKEN": SECRET},
                            vid="va")["code"] == "OK"
        assert node.publish("pod-b", {"source": src, "options": "npy"},
                            vid="vb")["code"] == "OK"
        before = sorted(node.daemons())
        node.restart_plugin()
        assert "adopted 2 daemons" in node.log("plugin")
        assert sorted(node.daemons()) == before
        for pod in ("pod-a", "pod-b"):
            assert pod_read(node.target(pod), list(want)) == want
        # a second pod of pod-b's volume: the same daemon
        assert node.publish("pod-c", {"source": src, "options": "npy"},
                            vid="vb")["code"] == "OK"
        assert sorted(node.daemons()) == before
        # pod-b's daemon (no credentials) dies: recovered, both pods read
        (b,) = node.daemons("npy")
        t = time.time()
        os.kill(b, signal.SIGKILL)
        wait_dead(b)
        while time.time() < t + 5:
            new = node.daemons("npy")
            if new and new != [b]:
                try:
                    if pod_read(node.target("pod-b"), list(want)) == want:
                        break
                except AssertionError:
                    pass
            time.sleep(0.05)
        assert pod_read(node.target("pod-c"), list(want)) == want
        # pod-a's daemon had a token, which the restart lost: it is
        # mounted again by the next publish that brings it
        (a,) = [p for p in node.daemons() if p not in node.daemons("npy")]
        os.kill(a, signal.SIGKILL)
        wait_dead(a)
        time.sleep(1)
        assert "its credentials went with the plugin's restart" in \
            node.log("plugin")
        assert node.publish("pod-d", {"source": src}, {"HF_TOKEN": SECRET},
                            vid="va")["code"] == "OK"
        for pod in ("pod-a", "pod-d"):
            assert pod_read(node.target(pod), list(want)) == want
        for pod, vid in (("pod-a", "va"), ("pod-b", "vb"), ("pod-c", "vb"),
                         ("pod-d", "va")):
            assert node.unpublish(pod, vid)["code"] == "OK"
            assert not os.path.exists(node.target(pod))
        no_secret_anywhere(node, SECRET, node.daemons("npy")[:0])


def test_plugin_pod_replaced(d):
    """The DaemonSet's pod replaced: the plugin stopped, its daemons gone
    with the old pod's daemons container (killed here), a new plugin. It
    mounts each dead mount again on top of its targets: a pod holding a
    slave bind of the target (as runc mounts a kubelet volume) reads
    again; a volume that had credentials, at the next publish that brings
    them (kubelet's republish: requiresRepublish)."""
    src, want = model(d)
    croot = os.path.join(d, "container-mnt")
    os.mkdir(croot)
    with Node(d, grace="30s") as node:
        assert node.publish("pod-a", {"source": src}, vid="va")["code"] \
            == "OK"
        assert node.publish("pod-b", {"source": src}, {"HF_TOKEN": SECRET},
                            vid="vb")["code"] == "OK"
        pod = subprocess.Popen(
            ["unshare", "-m", "--propagation", "slave", "sh", "-c",
             'mount --rbind "$1" "$2" && mount --make-rslave "$2" && '
             'exec "$3" -c "$4" "$2" follow model/layers/0/w', "pod",
             node.target("pod-a"), croot, sys.executable, POD],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        T._procs.append(pod)
        try:
            first = pod.stdout.readline().decode().split()
            assert first[0] == "ok", (first, pod.stderr.read())
            node.plugin.terminate()
            assert node.plugin.wait(timeout=10) == 0
            old = node.daemons()
            assert len(old) == 2, old
            killed = time.time()
            for p in old:
                os.kill(p, signal.SIGKILL)
            dead = max(wait_dead(p) for p in old)
            node.start_plugin()
            back, errors = _back(pod, killed, dead)
            assert back is not None, node.log("plugin")
            print("   the pod reads again %.2f s after its daemon was "
                  "killed with the plugin down" % back)
        finally:
            pod.kill()
            pod.wait()
            pod.stdout.close()
            pod.stderr.close()
        assert "its mount answers ENOTCONN: mounting %s again for 1 " \
            "targets" % src in node.log("plugin"), node.log("plugin")
        assert node.publish("pod-b", {"source": src}, {"HF_TOKEN": SECRET},
                            vid="vb")["code"] == "OK"
        assert pod_read(node.target("pod-b"), list(want)) == want
        assert len(node.daemons()) == 2
        for pod_, vid in (("pod-a", "va"), ("pod-b", "vb")):
            assert node.unpublish(pod_, vid)["code"] == "OK"
            assert not mounts_under(os.path.dirname(node.target(pod_)))


def test_grace(d):
    src, want = model(d)
    with Node(d, grace="2s") as node:
        for pod, vid in (("pod-a", "v1"), ("pod-b", "v2")):
            assert node.publish(pod, {"source": src}, vid=vid)["code"] == \
                "OK"
        pid = node.daemons()
        staging = [m for m in mounts_under(node.state)]
        assert len(pid) == 1 and len(staging) == 1, (pid, staging)
        assert node.unpublish("pod-a", "v1")["code"] == "OK"
        assert not os.path.exists(node.target("pod-a"))
        # unpublish again: the same answer
        assert node.unpublish("pod-a", "v1")["code"] == "OK"
        assert node.unpublish("pod-b", "v2")["code"] == "OK"
        assert not os.path.exists(node.target("pod-b"))
        t = time.time()
        time.sleep(1)
        assert node.daemons() == pid and mounts_under(node.state) == staging
        # a pod within the grace time finds it warm: the same daemon
        assert node.publish("pod-c", {"source": src}, vid="v3")["code"] == \
            "OK"
        assert node.daemons() == pid
        assert node.unpublish("pod-c", "v3")["code"] == "OK"
        t = time.time()
        while node.daemons() and time.time() < t + 10:
            time.sleep(0.05)
        gone = time.time() - t
        assert not node.daemons() and not mounts_under(node.state)
        assert 1.5 <= gone <= 6, gone


def test_refusals(d):
    src, _ = model(d)
    with Node(d) as node:
        cases = [
            (dict(mode="SINGLE_NODE_WRITER"), {"source": src}, None,
             "InvalidArgument", "read-only"),
            (dict(block=True), {"source": src}, None, "InvalidArgument",
             "block"),
            ({}, {"source": "hf://org/m"}, None, "InvalidArgument",
             "names a commit"),
            ({}, {"source": "hf://org/m@main"}, None, "InvalidArgument",
             "names a commit"),
            ({}, {"source": src, "options": "cache=/tmp/x"}, None,
             "InvalidArgument", "not one a volume may set"),
            ({}, {"source": src, "options": "offline"}, None,
             "InvalidArgument", "not one a volume may set"),
            ({}, {"source": src, "options": "allow_other"}, None,
             "InvalidArgument", "not one a volume may set"),
            ({}, {"source": src, "color": "blue"}, None, "InvalidArgument",
             "unknown volume attribute"),
            ({}, {}, None, "InvalidArgument", "source"),
            ({}, {"source": src}, {"PATH": SECRET}, "InvalidArgument",
             "secret key \"PATH\""),
            ({}, {"source": os.path.join(src, "nothing.safetensors")}, None,
             "Internal", "No such file"),
            # a path on the node: only under --local-dir, never the node
            # cache (every tenant's blocks: %repo/ shows a folder's every
            # file) nor a folder holding it, nor by "..", nor HF:// for
            # hf:// to get past the commit rule
            ({}, {"source": node.cache}, None, "InvalidArgument",
             "not under"),
            ({}, {"source": d}, None, "InvalidArgument", "not under"),
            ({}, {"source": src + "/../cache"}, None, "InvalidArgument",
             "no \"..\""),
            ({}, {"source": "/etc"}, None, "InvalidArgument", "not under"),
            ({}, {"source": "HF://org/m@main"}, None, "InvalidArgument",
             "names a commit"),
            # what a volume may ask of the node: --max-threads and
            # --max-connections (16 by default)
            ({}, {"source": src, "options": "threads=17"}, None,
             "InvalidArgument", "at most threads=16 (the plugin's "
             "--max-threads)"),
            ({}, {"source": src, "options": "connections=64"}, None,
             "InvalidArgument", "--max-connections"),
        ]
        for kw, attrs, secrets, code, says in cases:
            r = node.publish("pod-x", attrs, secrets, **kw)
            assert r["code"] == code and says in r["message"], (attrs, r)
            assert SECRET not in r["message"]
            assert not node.daemons() and not mounts_under(node.state), r
            assert not mounts_under(node.kubelet + "/pods"), r
        # a writer mode is read-only when the volume says readOnly
        r = node.publish("pod-x", {"source": src}, mode="SINGLE_NODE_WRITER",
                         readonly=True)
        assert r["code"] == "OK", r
        assert node.unpublish("pod-x")["code"] == "OK"
        for bad in ({"targetPath": node.target("p")}, {"volumeId": "v"}):
            r = node.call("NodeUnpublishVolume", bad)
            assert r["code"] == "InvalidArgument", r
        assert SECRET not in node.log("plugin") + node.log("launcher")


def test_host_policy(d):
    """The plugin's --allow-hosts: by default an http(s):// source on a
    loopback (link-local, private, ...) host is refused before anything
    asks it, with no daemon started; a numeric host that is not a dotted
    quad is refused; an explicit entry lets that address in, and no
    other; the daemon holds every connection to the rule itself (stfs -o
    public_net,allow_net=), so a redirect from the allowed server to
    another loopback address is refused by stfs."""
    os.chmod(os.path.dirname(d), 0o711)     # the daemons (nobody) get in
    src, want = model(d)
    port = free_port()
    ngx = Nginx(os.path.join(d, "ngx"), src, port=port, also=("127.0.0.2",),
                extra="    location /to2/ { return 302 "
                "http://127.0.0.2:%d/model.safetensors; }" % port)
    url = "http://%s:" + str(port) + "/model.safetensors"
    tensor = "model/layers/1/w"

    def asked():
        with open(os.path.join(d, "ngx", "access.log")) as f:
            return sum(1 for x in f if x.startswith("/model.safetensors "))
    try:
        with Node(os.path.join(d, "default"), plugin_args=[]) as node:
            for host, code, says in (
                    ("127.0.0.1", "PermissionDenied",
                     "127.0.0.1, a loopback address: refused by this node"),
                    ("127.0.0.2", "PermissionDenied", "a loopback address"),
                    ("localhost", "PermissionDenied", "a loopback address"),
                    ("[::1]", "PermissionDenied", "a loopback address"),
                    ("[::ffff:127.0.0.1]", "PermissionDenied", "loopback"),
                    ("0.0.0.0", "PermissionDenied", "an unspecified"),
                    ("2130706433", "InvalidArgument", "not a dotted quad"),
                    ("0177.0.0.1", "InvalidArgument", "not a dotted quad"),
                    ("0x7f.0.0.1", "InvalidArgument", "not a dotted quad"),
                    ("127.1", "InvalidArgument", "not a dotted quad"),
                    ("x@127.0.0.1", "InvalidArgument", "user info")):
                r = node.publish("pod-x", {"source": url % host})
                assert r["code"] == code and says in r["message"], (host, r)
                assert not node.daemons() and not mounts_under(node.state)
                assert not mounts_under(node.kubelet + "/pods"), r
            assert asked() == 0                 # never asked
        with Node(os.path.join(d, "allow")) as node:  # --allow-hosts=127.0.0.1
            r = node.publish("pod-a", {"source": url % "127.0.0.1"})
            assert r["code"] == "OK", r
            got = pod_read(node.target("pod-a"), [tensor])
            assert got == {tensor: want[tensor]}, got
            assert asked() > 0
            assert node.daemons("public_net") == node.daemons() and \
                node.daemons("allow_net=127.0.0.1/32") == node.daemons()
            for host in ("[::1]", "127.0.0.2", "localhost"):
                r = node.publish("pod-b", {"source": url % host}, vid="v2")
                assert r["code"] == "PermissionDenied", (host, r)
            # the allowed server redirects to 127.0.0.2: stfs refuses the
            # connection (Internal, with its words), nothing asked there
            n = asked()
            r = node.publish("pod-b", {"source": "http://127.0.0.1:%d/to2/"
                                       "model.safetensors" % port}, vid="v2")
            assert r["code"] == "Internal" and "a connection to 127.0.0.2 " \
                "refused: a loopback address (public_net)" in r["message"], r
            assert asked() == n and len(node.daemons()) == 1
            # the plugin restarts with another --allow-hosts: pod-a's
            # daemon is adopted and reads on, but a new publish of its
            # volume gets a daemon under the rule now in force, never the
            # one started under the old (the policy's options are part of
            # a daemon's key)
            old = node.daemons()
            node.plugin_argv = [
                "--allow-hosts=127.0.0.1,127.0.0.2"
                if a == "--allow-hosts=127.0.0.1" else a
                for a in node.plugin_argv]
            node.restart_plugin()
            assert "adopted the daemon of" in node.log("plugin")
            r = node.publish("pod-c", {"source": url % "127.0.0.1"}, vid="v3")
            assert r["code"] == "OK", r
            new = [p for p in node.daemons() if p not in old]
            assert len(new) == 1 and \
                node.daemons("allow_net=127.0.0.2/32") == new, (old, new)
            for pod in ("pod-a", "pod-c"):
                got = pod_read(node.target(pod), [tensor])
                assert got == {tensor: want[tensor]}, (pod, got)
            assert node.unpublish("pod-c", "v3")["code"] == "OK"
            assert node.unpublish("pod-a")["code"] == "OK"
    finally:
        ngx.stop()


def test_max_daemons(d):
    """--max-daemons=1: a publish that needs a second daemon is
    ResourceExhausted while the first has a pod (nothing started); a
    publish of the same volume shares the daemon; once the first is idle
    (its grace time), it is stopped to make room."""
    src, want = model(d)
    with Node(d, grace="60s", plugin_args=["--max-daemons=1"]) as node:
        assert node.publish("pod-a", {"source": src})["code"] == "OK"
        pids = node.daemons()
        assert len(pids) == 1, pids
        r = node.publish("pod-b", {"source": src, "options": "npy"},
                         vid="vol-2")
        assert r["code"] == "ResourceExhausted" and \
            "--max-daemons" in r["message"], r
        assert node.daemons() == pids
        assert not os.path.exists(node.target("pod-b"))
        r = node.publish("pod-c", {"source": src}, vid="vol-3")
        assert r["code"] == "OK" and node.daemons() == pids, r
        for pod, vid in (("pod-a", "vol-1"), ("pod-c", "vol-3")):
            assert node.unpublish(pod, vid)["code"] == "OK"
        # idle, in its 60 s of grace: stopped for the new one
        r = node.publish("pod-b", {"source": src, "options": "npy"},
                         vid="vol-2")
        assert r["code"] == "OK", r
        wait_dead(pids[0])
        now = node.daemons()
        assert len(now) == 1 and now != pids, (pids, now)
        assert pod_read(node.target("pod-b"), list(want)) == want
        assert "to make room (--max-daemons)" in node.log("plugin")
        assert node.unpublish("pod-b", "vol-2")["code"] == "OK"


def test_hub_token(d):
    os.chmod(os.path.dirname(d), 0o711)     # the daemons (nobody) get in
    with World(d) as w:
        a = open(os.path.join(T.REAL, "jl-nonsharded",
                              "model.safetensors"), "rb").read()
        sha_ = w.hub.push(w.hub.repo("org/gated", gated=True),
                          {"model.safetensors": a,
                           "config.json": b'{"model_type": "llama"}'})
        src = "hf://org/gated@" + sha_
        env = {"HF_ENDPOINT": w.hub.url}
        with Node(os.path.join(d, "node"), env=env) as node:
            r = node.publish("pod-a", {"source": src},
                             {"HF_TOKEN": "hf_wrong_" + SECRET})
            assert r["code"] == "Internal" and "restricted" in r["message"], r
            assert not node.daemons()
            r = node.publish("pod-a", {"source": src},
                             {"HF_TOKEN": hubemu.TOKEN})
            assert r["code"] == "OK", r
            got = pod_read(node.target("pod-a"),
                           ["%repo/model.safetensors", "%repo/config.json"])
            assert got == {
                "%repo/model.safetensors": hashlib.sha256(a).hexdigest(),
                "%repo/config.json": hashlib.sha256(
                    b'{"model_type": "llama"}').hexdigest()}
            no_secret_anywhere(node, hubemu.TOKEN, node.daemons())
            # a user of the node (not root) reads the gated files through
            # no daemon's mount under the state directory
            mounts = os.path.join(node.state, "mounts")
            for p in (d, os.path.dirname(d)):   # the way there is open
                os.chmod(p, 0o711)
            r = subprocess.run(
                ["setpriv", "--reuid=%d" % NOBODY, "--regid=%d" % NOBODY,
                 "--clear-groups", sys.executable, "-c",
                 "import os, sys\n"
                 "for k in os.listdir(sys.argv[1]):\n"
                 "    p = os.path.join(sys.argv[1], k, '%repo/config.json')\n"
                 "    print(open(p).read())\n", mounts],
                capture_output=True, text=True, timeout=30)
            assert r.returncode != 0 and "PermissionError" in r.stderr, r
            assert "llama" not in r.stdout
            # nor does another daemon of the node (the same user: another
            # tenant's, were it taken over) read this one's environment
            for pid in node.daemons():
                r = subprocess.run(
                    ["setpriv", "--reuid=%d" % NOBODY, "--regid=%d" % NOBODY,
                     "--clear-groups", "cat", "/proc/%d/environ" % pid],
                    capture_output=True, timeout=30)
                assert r.returncode != 0 and \
                    hubemu.TOKEN.encode() not in r.stdout, r
            # a branch is refused, unless the volume allows it
            r = node.publish("pod-b", {"source": "hf://org/gated"},
                             {"HF_TOKEN": hubemu.TOKEN}, vid="v2")
            assert r["code"] == "InvalidArgument", r
            r = node.publish("pod-b", {"source": "hf://org/gated",
                                       "allowBranch": "true"},
                             {"HF_TOKEN": hubemu.TOKEN}, vid="v2")
            assert r["code"] == "OK", r
            assert node.unpublish("pod-a")["code"] == "OK"
            assert node.unpublish("pod-b", "v2")["code"] == "OK"
            end = time.time() + 10
            while node.daemons() and time.time() < end:
                time.sleep(0.05)
            # the Hub cannot be reached: a source that needs credentials is
            # refused, whatever the node cache holds of it
            w.hub.stop()
            for tok in (hubemu.TOKEN, "hf_other"):
                r = node.publish("pod-c", {"source": src,
                                           "options": "retries=0"},
                                 {"HF_TOKEN": tok}, vid="v3")
                assert r["code"] == "Internal" and \
                    "Couldn't connect" in r["message"], r
                assert not node.daemons()
        assert "Bearer " + hubemu.TOKEN in [a for s, a in w.hub.seen]


def test_two_sources_one_cache(d):
    """Two sources on one node: two daemons, one cache directory; each
    pod reads its own source's files and sees none of the other's; an
    init container's `stfs prefetch --wait` through the volume returns
    once the node cache holds the model."""
    os.chmod(os.path.dirname(d), 0o711)     # the daemons (nobody) get in
    with World(d) as w:
        files = {}
        for name in ("org/a", "org/b"):
            files[name] = {"model.safetensors": T.write_st(
                os.path.join(d, name.replace("/", "-")),
                [("w", "U8", [4096], os.urandom(4096))]),
                "config.json": json.dumps({"name": name}).encode()}
            with open(files[name]["model.safetensors"], "rb") as f:
                files[name]["model.safetensors"] = f.read()
        srcs = {name: "hf://%s@%s" % (name, w.hub.push(w.hub.repo(name), fl))
                for name, fl in files.items()}
        with Node(os.path.join(d, "node"),
                  env={"HF_ENDPOINT": w.hub.url}) as node:
            for pod, name in (("pod-a", "org/a"), ("pod-b", "org/b")):
                r = node.publish(pod, {"source": srcs[name]}, vid=pod)
                assert r["code"] == "OK", r
            assert len(node.daemons()) == 2
            for pod, name in (("pod-a", "org/a"), ("pod-b", "org/b")):
                want = {"%repo/" + n: hashlib.sha256(b).hexdigest()
                        for n, b in files[name].items()}
                assert pod_read(node.target(pod), list(want)) == want
                assert sorted(os.listdir(os.path.join(
                    node.target(pod), "%repo"))) == sorted(files[name])
            # the readiness check of examples/inline-vllm.yaml, in a pod
            r = subprocess.run(["unshare", "-m", "--propagation", "slave",
                                T.STFS, "prefetch", "--wait", "-q",
                                node.target("pod-a")],
                               capture_output=True, timeout=60)
            assert r.returncode == 0, r.stderr
            # one cache for both: an object directory per source's file
            objs = os.listdir(os.path.join(node.cache, "v1"))
            assert len(objs) >= 2, objs
            assert os.stat(node.cache).st_uid == NOBODY
            # a source slow to open (the Hub answers 429, wait 2 s) holds
            # up no other pod's publish of a live source
            sha = w.hub.push(w.hub.repo("org/slow"), files["org/a"])
            w.hub.storm = 2
            slow = {}
            th = threading.Thread(target=lambda: slow.update(node.publish(
                "pod-s", {"source": "hf://org/slow@" + sha}, vid="pod-s")))
            th.start()
            time.sleep(0.5)
            r = node.publish("pod-c", {"source": srcs["org/a"]}, vid="pod-a")
            assert r["code"] == "OK" and r["seconds"] < 1, r
            assert th.is_alive(), slow
            # a deadline (kubelet's) before the source has opened: the
            # daemon goes on opening, and the next try finds it
            sha = w.hub.push(w.hub.repo("org/slow2"), files["org/b"])
            r = node.call("NodePublishVolume", {
                "volumeId": "pod-t", "targetPath": node.target("pod-t"),
                "volumeCapability": {"accessMode": {
                    "mode": "MULTI_NODE_READER_ONLY"}, "mount": {}},
                "volumeContext": {"source": "hf://org/slow2@" + sha}},
                timeout=1)
            assert r["code"] == "DeadlineExceeded", r
            started = sorted(node.daemons())
            w.hub.storm = None
            th.join(60)
            assert slow["code"] == "OK", slow
            r = node.publish("pod-t", {"source": "hf://org/slow2@" + sha},
                             vid="pod-t")
            assert r["code"] == "OK", r
            assert sorted(node.daemons()) == started, (started,
                                                       node.daemons())
            want = {"%repo/" + n: hashlib.sha256(b).hexdigest()
                    for n, b in files["org/b"].items()}
            assert pod_read(node.target("pod-t"), list(want)) == want
            for pod in ("pod-a", "pod-b", "pod-c", "pod-s", "pod-t"):
                assert node.unpublish(pod, pod)["code"] == "OK"


PROBE = r"""
import sys
try:
    open(sys.argv[1], "rb").read()
    print(0)
except OSError as e:
    print(e.errno)
"""


def pod_errno(target, path):
    """A pod reads path under target: 0, or the errno it got."""
    r = subprocess.run(["unshare", "-m", "--propagation", "slave",
                        sys.executable, "-c", PROBE,
                        os.path.join(target, path)],
                       capture_output=True, timeout=60)
    assert r.returncode == 0, r.stderr.decode()
    return int(r.stdout)


def test_offline_cache(d):
    """allowOfflineCache: the Hub stopped, a gated source read once is
    served from the node cache, to volumes that allow it only, and only
    with the token the Hub accepted for it on this node (after a restart
    of the plugin too); another token, or none, is refused."""
    os.chmod(os.path.dirname(d), 0o711)     # the daemons (nobody) get in
    with World(d) as w:
        read, never = os.urandom(65536), os.urandom(65536)
        path = T.write_st(os.path.join(d, "m.safetensors"), [
            ("a", "U8", [65536], read),
            # far from "a": no readahead of "a" reaches "z"
            ("pad", "U8", [4 << 20], os.urandom(4 << 20)),
            ("z", "U8", [65536], never)])
        with open(path, "rb") as f:
            files = {"model.safetensors": f.read(),
                     "config.json": b'{"model_type": "llama"}'}
        src = "hf://org/gated@" + w.hub.push(
            w.hub.repo("org/gated", gated=True), files)
        # small blocks, and no retry of a connection refused: seconds
        attrs = {"source": src, "options": "block_size=64K,retries=0"}
        allow = dict(attrs, allowOfflineCache="true")
        tok = {"HF_TOKEN": hubemu.TOKEN}
        want = {"a": hashlib.sha256(read).hexdigest(),
                "%repo/config.json": hashlib.sha256(
                    files["config.json"]).hexdigest()}
        with Node(os.path.join(d, "node"),
                  env={"HF_ENDPOINT": w.hub.url}) as node:
            # the Hub answers: an online daemon, allowOfflineCache or not
            r = node.publish("pod-a", allow, tok)
            assert r["code"] == "OK", r
            assert len(node.daemons()) == 1 and not node.daemons("offline")
            assert pod_read(node.target("pod-a"), list(want)) == want
            # a token the Hub refuses: refused, whatever the volume says
            r = node.publish("pod-w", allow, {"HF_TOKEN": "hf_wrong"},
                             vid="vw")
            assert r["code"] == "Internal" and "restricted" in r["message"] \
                and "offline" not in r["message"], r
            assert len(node.daemons()) == 1 and not node.daemons("offline")
            assert node.unpublish("pod-a")["code"] == "OK"
            end = time.time() + 10
            while node.daemons() and time.time() < end:
                time.sleep(0.05)
            assert not node.daemons() and not mounts_under(node.state)
            # the Hub's acceptance of the token, on record: a marker
            # named by the daemon's key, the token nowhere in it
            (mark,) = os.listdir(os.path.join(node.state, "accepted"))
            st = os.stat(os.path.join(node.state, "node.key"))
            assert st.st_mode & 0o777 == 0o600 and st.st_size == 32
            w.hub.stop()
            # the markers outlive the plugin
            node.restart_plugin()
            # the Hub cannot be reached: refused without the attribute
            for a in (attrs, dict(attrs, allowOfflineCache="false")):
                r = node.publish("pod-b", a, tok, vid="v2")
                assert r["code"] == "Internal" and \
                    "Couldn't connect" in r["message"], r
                assert not node.daemons() and not mounts_under(node.state)
            # with it, a token the Hub never accepted here, or none:
            # refused, no daemon, nothing to read
            for bad in ({"HF_TOKEN": "hf_never_seen"}, {}):
                r = node.publish("pod-x", allow, bad, vid="vx")
                assert r["code"] == "FailedPrecondition" and \
                    "never accepted for this source on this node" in \
                    r["message"] and "Couldn't connect" in r["message"], r
                assert not node.daemons() and not mounts_under(node.state)
                assert not os.path.ismount(node.target("pod-x"))
                assert not os.path.exists(node.target("pod-x")) or \
                    not os.listdir(node.target("pod-x"))
            assert os.listdir(os.path.join(node.state, "accepted")) == [mark]
            # with it: an offline daemon on the node cache
            r = node.publish("pod-b", allow, tok, vid="v2")
            assert r["code"] == "OK", r
            off = node.daemons("offline")
            assert len(off) == 1 and node.daemons() == off, node.daemons()
            assert pod_read(node.target("pod-b"), list(want)) == want
            assert pod_errno(node.target("pod-b"), "z") == 5    # EIO
            assert pod_read(node.target("pod-b"), ["a"]) == {"a": want["a"]}
            # the same publish again: the same answer; a second pod of
            # the volume shares the offline daemon
            assert node.publish("pod-b", allow, tok, vid="v2")["code"] == "OK"
            r = node.publish("pod-c", allow, tok, vid="v3")
            assert r["code"] == "OK", r
            assert node.daemons("offline") == off
            assert pod_read(node.target("pod-c"), ["a"]) == {"a": want["a"]}
            # a source never opened here: its token was never accepted
            # for it
            other = dict(allow, source="hf://org/gated@" + "0" * 40)
            r = node.publish("pod-d", other, tok, vid="v4")
            assert r["code"] == "FailedPrecondition" and "Couldn't connect" \
                in r["message"] and "never accepted" in r["message"], r
            assert node.daemons("offline") == off
            # the token went nowhere but to the offline daemon, whose
            # environment holds it to name its trust domain in the node
            # cache (it sends it nowhere: offline)
            no_secret_anywhere(node, hubemu.TOKEN, off)
            for pod, vid in (("pod-b", "v2"), ("pod-c", "v3")):
                assert node.unpublish(pod, vid)["code"] == "OK"
            end = time.time() + 10
            while node.daemons() and time.time() < end:
                time.sleep(0.05)
            assert not node.daemons() and not mounts_under(node.state)


def test_offline_tenant_url(d):
    """Volume A reads a gated hf:// file with its token; volume B names
    the file's resolve URL as a plain source, with no secret: refused
    while the Hub answers (401) and while it cannot be reached (the node
    cache holds A's bytes only in A's token's trust domain), with or
    without allowOfflineCache; no daemon, nothing mounted."""
    os.chmod(os.path.dirname(d), 0o711)     # the daemons (nobody) get in
    with World(d) as w:
        secret = os.urandom(65536)
        path = T.write_st(os.path.join(d, "m.safetensors"),
                          [("a", "U8", [65536], secret)])
        with open(path, "rb") as f:
            sha = w.hub.push(w.hub.repo("org/gated", gated=True),
                             {"model.safetensors": f.read()})
        url = "%s/org/gated/resolve/%s/model.safetensors" % (w.hub.url, sha)
        want = {"a": hashlib.sha256(secret).hexdigest()}
        with Node(os.path.join(d, "node"),
                  env={"HF_ENDPOINT": w.hub.url}) as node:
            r = node.publish("pod-a", {"source": "hf://org/gated@" + sha,
                                       "options": "retries=0"},
                             {"HF_TOKEN": hubemu.TOKEN})
            assert r["code"] == "OK", r
            assert pod_read(node.target("pod-a"), ["a"]) == want
            assert node.unpublish("pod-a")["code"] == "OK"
            end = time.time() + 10
            while node.daemons() and time.time() < end:
                time.sleep(0.05)
            assert not node.daemons()
            plain = {"source": url, "options": "retries=0"}
            r = node.publish("pod-b", plain, {}, vid="vb")
            assert r["code"] == "Internal" and "401" in r["message"], r
            w.hub.stop()
            for attrs in (plain, dict(plain, allowOfflineCache="true")):
                r = node.publish("pod-b", attrs, {}, vid="vb")
                assert r["code"] != "OK", ("B mounted A's bytes", r)
                assert "Couldn't connect" in r["message"], r
                assert not node.daemons() and not mounts_under(node.state)
                assert not os.path.ismount(node.target("pod-b"))


def test_s3_keys(d):
    """s3:// (OpenStack Swift, which checks every signature) with the
    AWS keys from the secret: the pod reads the prefix's files; a wrong
    key and a user without access are refused with S3's reasons."""
    os.chmod(os.path.dirname(d), 0o711)     # the daemons (nobody) get in
    sw = s3server.shared()
    a = open(os.path.join(T.REAL, "jl-nonsharded", "model.safetensors"),
             "rb").read()
    conf = b'{"model_type": "llama"}'
    sw.put("models", "csi/model.safetensors", a)
    sw.put("models", "csi/config.json", conf)
    src = "s3://models/csi/"
    keys = {"AWS_ACCESS_KEY_ID": s3server.ACCESS,
            "AWS_SECRET_ACCESS_KEY": s3server.SECRET}
    with Node(os.path.join(d, "node"),
              env={"AWS_ENDPOINT_URL": sw.endpoint}) as node:
        for bad, says in (
                (dict(keys, AWS_SECRET_ACCESS_KEY="wrong"),
                 "SignatureDoesNotMatch"),
                ({"AWS_ACCESS_KEY_ID": s3server.READER,
                  "AWS_SECRET_ACCESS_KEY": s3server.READER_SECRET},
                 "AccessDenied")):
            r = node.publish("pod-a", {"source": src}, bad)
            assert r["code"] == "Internal" and says in r["message"], r
            assert not node.daemons() and not mounts_under(node.state)
        r = node.publish("pod-a", {"source": src}, keys)
        assert r["code"] == "OK", r
        got = pod_read(node.target("pod-a"),
                       ["%repo/model.safetensors", "%repo/config.json"])
        assert got == {
            "%repo/model.safetensors": hashlib.sha256(a).hexdigest(),
            "%repo/config.json": hashlib.sha256(conf).hexdigest()}
        no_secret_anywhere(node, s3server.SECRET, node.daemons())
        # a volume's daemon never falls back on the node's own role
        # (instance metadata): only its secret's keys
        for pid in node.daemons():
            with open("/proc/%d/environ" % pid, "rb") as f:
                env = f.read().split(b"\0")
            assert b"AWS_EC2_METADATA_DISABLED=true" in env, env
        assert node.unpublish("pod-a")["code"] == "OK"


def test_mirror(d):
    """A volume with a `mirror` attribute and the mirror's own keys in
    its secret (STFS_MIRROR_AWS_*): the pod reads every tensor equal to
    the source, the origin (the Hub emulator and its CDN, nginx) is asked
    for nothing, and the keys are in no argv, log or file of the node.
    Without the mirror's keys the bucket (which refuses anonymous reads)
    is not used and the origin serves; the origin's AWS keys with a
    mirror and no keys of its own are refused."""
    os.chmod(os.path.dirname(d), 0o711)     # the daemons (nobody) get in
    sw = s3server.shared()
    with World(d) as w:
        tensors = [("model.layers.%d.w" % i, "F32", [256, 256],
                    os.urandom(256 * 256 * 4)) for i in range(6)]
        path = os.path.join(d, "m.safetensors")
        T.write_st(path, tensors)
        with open(path, "rb") as f:
            st = f.read()
        conf = b'{"model_type": "llama"}'
        src = "hf://org/m@" + w.hub.push(w.hub.repo("org/m"), {
            "model.safetensors": st, "config.json": conf})
        writer = dict(os.environ, HF_ENDPOINT=w.hub.url,
                      AWS_ENDPOINT_URL=sw.endpoint,
                      AWS_ACCESS_KEY_ID=s3server.ACCESS,
                      AWS_SECRET_ACCESS_KEY=s3server.SECRET,
                      AWS_SHARED_CREDENTIALS_FILE=os.path.join(d, "none"),
                      AWS_CONFIG_FILE=os.path.join(d, "none"))
        r = subprocess.run([T.STFS, "mirror", "-q", src,
                            "s3://models/csi-mirror"], env=writer,
                           capture_output=True, text=True, timeout=300)
        assert r.returncode == 0, r
        want = {n.replace(".", "/"): hashlib.sha256(data).hexdigest()
                for n, _, _, data in tensors}
        want["%repo/model.safetensors"] = hashlib.sha256(st).hexdigest()
        want["%repo/config.json"] = hashlib.sha256(conf).hexdigest()
        attrs = {"source": src, "mirror": "s3://models/csi-mirror"}
        keys = {"STFS_MIRROR_AWS_ACCESS_KEY_ID": s3server.ACCESS,
                "STFS_MIRROR_AWS_SECRET_ACCESS_KEY": s3server.SECRET}
        with Node(os.path.join(d, "node"),
                  env={"HF_ENDPOINT": w.hub.url,
                       "AWS_ENDPOINT_URL": sw.endpoint}) as node:
            seen, ngx = len(w.hub.seen), len(w.nginx_log().splitlines())
            r = node.publish("pod-a", attrs, keys)
            assert r["code"] == "OK", r
            assert pod_read(node.target("pod-a"), sorted(want)) == want
            # the origin was asked nothing: no listing, no bytes
            assert w.hub.seen[seen:] == [], w.hub.seen[seen:]
            assert w.nginx_log().splitlines()[ngx:] == []
            assert "stfs: mirror s3://models/csi-mirror: reading " \
                "hf://org/m@" in node.log("launcher"), node.log("launcher")
            no_secret_anywhere(node, s3server.SECRET, node.daemons())
            # without the mirror's keys: the bucket refuses, the origin
            # serves (another daemon: other credentials)
            r = node.publish("pod-b", attrs, {"HF_TOKEN": hubemu.TOKEN},
                             vid="v2")
            assert r["code"] == "OK", r
            assert pod_read(node.target("pod-b"), sorted(want)) == want
            assert "not used: cannot read its manifest" in \
                node.log("launcher"), node.log("launcher")
            assert len(w.nginx_log().splitlines()) > ngx
            # the origin's keys, and none of the mirror's: refused
            r = node.publish("pod-c", dict(attrs, source="s3://models/x/"),
                             {"AWS_ACCESS_KEY_ID": s3server.ACCESS,
                              "AWS_SECRET_ACCESS_KEY": s3server.SECRET},
                             vid="v3")
            assert r["code"] == "InvalidArgument" and \
                "give the mirror its own" in r["message"], r
            assert s3server.SECRET not in r["message"]
            assert node.unpublish("pod-a")["code"] == "OK"
            assert node.unpublish("pod-b", "v2")["code"] == "OK"


def run():
    try:
        return T.run_tests([test_sanity, test_publish_two_pods,
                            test_recovery, test_plugin_restart,
                            test_plugin_pod_replaced, test_grace,
                            test_refusals, test_host_policy,
                            test_max_daemons, test_hub_token,
                            test_two_sources_one_cache, test_offline_cache,
                            test_offline_tenant_url,
                            test_s3_keys, test_mirror])
    finally:
        s3server.stop_shared()


if __name__ == "__main__":
    if os.geteuid() != 0:
        if os.environ.get("CI") == "true":
            print("test_csi needs root under CI")
            sys.exit(1)
        print("SKIP: the CSI driver mounts: root only")
        sys.exit(1 if os.environ.get("CI") == "true" else 77)
    if not os.access(GO, os.X_OK):
        print("go is missing: scripts/deps.sh installs it")
        sys.exit(1)
    sys.exit(run())
