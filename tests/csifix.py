"""csifix.py: what the CSI driver's tests and benchmark share: the Go
builds of csi/ (offline), a node (a kubelet directory that is a shared
mount, the launcher and the plugin as processes of their own, csicall for
kubelet's calls), and pods (processes in their own mount namespace, slaves
of the node's)."""
import atexit
import hashlib
import json
import os
import shutil
import signal
import subprocess
import sys
import time

import stfstest as T

HERE = os.path.dirname(os.path.abspath(__file__))
MODULE = os.path.join(HERE, "..", "csi")
NOBODY = 65534
# Go: on PATH, else where go.dev's archive puts it (scripts/deps.sh)
GO = shutil.which("go") or "/usr/local/go/bin/go"
_bins = {}


def _go_caches():
    """Go's build and module caches as the environment names them when
    this is imported (a test's fixture may point XDG_CACHE_HOME elsewhere
    later, which would give Go an empty build cache)."""
    try:
        r = subprocess.run([GO, "env", "GOCACHE", "GOMODCACHE"],
                           capture_output=True, text=True, timeout=60)
        cache, mods = r.stdout.split()
        return {"GOCACHE": cache, "GOMODCACHE": mods}
    except (OSError, ValueError, subprocess.SubprocessError):
        return {}


GO_CACHES = _go_caches()


def go_env():
    """go, offline: every module from the cache that deps.sh filled."""
    e = dict(os.environ)
    e.update(GOFLAGS="-mod=readonly", GOPROXY="off", GOTOOLCHAIN="local",
             CGO_ENABLED="0", **GO_CACHES)
    return e


def bins():
    """stfs-csi, csicall and csi-sanity, built once per run."""
    if not _bins:
        out = T.tmpdir()
        atexit.register(shutil.rmtree, out, True)
        os.chmod(out, 0o755)
        for name, pkg in (("stfs-csi", "./cmd/stfs-csi"),
                          ("csicall", "./test/csicall"),
                          ("csi-sanity", "github.com/kubernetes-csi/"
                           "csi-test/v5/cmd/csi-sanity")):
            r = subprocess.run([GO, "build", "-o", os.path.join(out, name),
                                pkg], cwd=MODULE, env=go_env(),
                               capture_output=True, timeout=900)
            assert r.returncode == 0, r.stderr.decode()
            _bins[name] = os.path.join(out, name)
    return _bins


def mounts_under(path):
    path = os.path.realpath(path)
    out = []
    with open("/proc/self/mountinfo") as f:
        for line in f:
            p = line.split()[4].encode().decode("unicode_escape")
            if p == path or p.startswith(path + "/"):
                out.append(p)
    return out


def sha(path):
    with open(path, "rb") as f:
        return hashlib.sha256(f.read()).hexdigest()


class Node:
    """A node: a kubelet directory (a shared mount), the launcher and
    the plugin, and their logs."""

    def __init__(self, d, grace="1s", env=None, launcher=None,
                 stfs_argv0=None, local_dir=None, plugin_args=None,
                 inherit=()):
        """launcher: a function of the launcher's socket that returns
        its command (default: stfs-csi daemon, here, as root dropping to
        nobody); stfs_argv0: the daemons' argv[0] (default: this run's
        copy of STFS); local_dir: the plugin's --local-dir (default:
        D/model, where test_csi's model() writes); plugin_args: more
        of the plugin's flags (default: --allow-hosts=127.0.0.1, so that
        http:// sources may name the tests' loopback servers, which the
        plugin refuses by default); inherit: descriptors the launcher and
        the plugin inherit, as from whoever starts them."""
        bins()      # first: a failed build leaves nothing mounted
        self.d = d
        self.procs = []
        os.makedirs(d, exist_ok=True)
        os.chmod(os.path.dirname(d), 0o711)
        os.chmod(d, 0o755)
        self.state = os.path.join(d, "state")
        self.cache = os.path.join(d, "cache")
        self.sock = "unix://" + os.path.join(d, "plugin", "csi.sock")
        os.makedirs(os.path.join(d, "launcher"))
        os.chown(os.path.join(d, "launcher"), NOBODY, NOBODY)
        self.launcher_sock = os.path.join(d, "launcher", "launcher.sock")
        self.launcher_cmd = launcher
        self.local_dir = local_dir or os.path.join(d, "model")
        self.plugin_args = ["--allow-hosts=127.0.0.1"] \
            if plugin_args is None else list(plugin_args)
        self.stfs_argv0 = (stfs_argv0 or T.stfs_for_others()).encode()
        self.inherit = tuple(inherit)
        self.logs = []
        self.kubelet = os.path.join(d, "kubelet")
        os.makedirs(self.kubelet)
        subprocess.run(["mount", "--bind", self.kubelet, self.kubelet],
                       check=True)
        try:
            subprocess.run(["mount", "--make-rshared", self.kubelet],
                           check=True)
            self.start_all(grace, env)
        except BaseException:
            self.close()
            raise

    def start_all(self, grace, env):
        e = dict(os.environ)
        e.update(env or {})
        argv = self.launcher_cmd(self.launcher_sock) if self.launcher_cmd \
            else [bins()["stfs-csi"], "daemon", "--socket",
                  self.launcher_sock, "--stfs", T.stfs_for_others(),
                  "--user", "%d:%d" % (NOBODY, NOBODY)]
        self.launcher = self.start("launcher", argv, e)
        end = time.time() + 20
        while not os.path.exists(self.launcher_sock):
            assert time.time() < end and self.launcher.poll() is None
            time.sleep(0.01)
        self.plugin_argv = [
            bins()["stfs-csi"], "--endpoint", self.sock, "--node-id",
            "node-1", "--launcher", self.launcher_sock, "--state-dir",
            self.state, "--cache-dir", self.cache, "--grace", grace,
            "--check-interval", "500ms", "--local-dir", self.local_dir] \
            + self.plugin_args
        self.start_plugin()

    def start_plugin(self):
        self.plugin = self.start("plugin", self.plugin_argv,
                                 dict(os.environ))
        end = time.time() + 10
        while self.call("Probe")["code"] != "OK":
            assert time.time() < end and self.plugin.poll() is None, \
                self.log("plugin")
            time.sleep(0.05)

    def stop_plugin(self):
        """Stop the plugin (SIGTERM, as an upgrade does)."""
        self.plugin.terminate()
        assert self.plugin.wait(timeout=10) == 0

    def restart_plugin(self):
        """Stop the plugin and start it again."""
        self.stop_plugin()
        self.start_plugin()

    def start(self, name, argv, env):
        log = open(os.path.join(self.d, name + ".log"), "ab")
        self.logs.append(log.name)
        p = subprocess.Popen(argv, stdout=log, stderr=log, env=env,
                             pass_fds=self.inherit)
        log.close()
        self.procs.append(p)
        T._procs.append(p)
        return p

    def log(self, name):
        with open(os.path.join(self.d, name + ".log")) as f:
            return f.read()

    def call(self, method, request=None, timeout=120):
        r = subprocess.run([bins()["csicall"]], input=json.dumps(
            {"endpoint": self.sock, "method": method,
             "request": request or {}, "timeout": timeout}).encode(),
            capture_output=True, timeout=timeout + 10)
        assert r.returncode == 0, r.stderr.decode()
        return json.loads(r.stdout)

    def target(self, pod, vol="models"):
        return os.path.join(self.kubelet, "pods", pod, "volumes",
                            "kubernetes.io~csi", vol, "mount")

    def publish(self, pod, attrs, secrets=None, mode="MULTI_NODE_READER_ONLY",
                readonly=False, vid="vol-1", block=False):
        cap = {"accessMode": {"mode": mode}}
        cap["block" if block else "mount"] = {}
        return self.call("NodePublishVolume", {
            "volumeId": vid, "targetPath": self.target(pod),
            "volumeCapability": cap, "readonly": readonly,
            "volumeContext": attrs, "secrets": secrets or {}})

    def unpublish(self, pod, vid="vol-1"):
        return self.call("NodeUnpublishVolume", {
            "volumeId": vid, "targetPath": self.target(pod)})

    def daemons(self, opt=None):
        """pids of the stfs daemons the launcher started (with the -o
        option opt)."""
        out = []
        for pid in os.listdir("/proc"):
            if not pid.isdigit():
                continue
            try:
                with open("/proc/%s/cmdline" % pid, "rb") as f:
                    args = f.read().split(b"\0")
                with open("/proc/%s/stat" % pid) as f:
                    st = f.read().rsplit(")", 1)[1].split()
            except OSError:
                continue
            if st[0] != "Z" and args[0] == self.stfs_argv0 \
                    and b"/dev/fd/3" in args and \
                    (opt is None or opt.encode() in args):
                out.append(int(pid))
        return out

    def close(self):
        for p in self.procs:
            if p.poll() is None:
                p.terminate()
                try:
                    p.wait(timeout=10)
                except subprocess.TimeoutExpired:
                    p.kill()
                    p.wait()
        for m in sorted(mounts_under(self.d), key=len, reverse=True):
            subprocess.run(["umount", "-l", m], capture_output=True)
        end = time.time() + 10
        while self.daemons() and time.time() < end:
            time.sleep(0.05)
        for pid in self.daemons():
            os.kill(pid, signal.SIGKILL)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        if exc[0] is not None:      # a failure: what the node said
            for name in ("plugin", "launcher"):
                print("--- %s.log\n%s" % (name, self.log(name)[-6000:]))
        self.close()


POD = r"""
import hashlib, json, os, sys, time
root, mode = sys.argv[1], sys.argv[2]
def digest(p):
    with open(os.path.join(root, p), "rb") as f:
        return hashlib.sha256(f.read()).hexdigest()
if mode == "read":
    print(json.dumps({p: digest(p) for p in sys.argv[3:]}))
else:   # follow: read one file again and again (every argv[4] s), say
    # when it works (and its digest) and when not (the errno)
    path = sys.argv[3]
    pause = float(sys.argv[4]) if len(sys.argv) > 4 else 0.05
    while True:
        try:
            print("ok %.3f %s" % (time.time(), digest(path)), flush=True)
        except OSError as e:
            print("err %.3f %d" % (time.time(), e.errno), flush=True)
        time.sleep(pause)
"""


def pod_read(target, paths):
    """A pod: its own mount namespace, slave to the node's; the digests
    of paths under target."""
    r = subprocess.run(["unshare", "-m", "--propagation", "slave",
                        sys.executable, "-c", POD, target, "read"] + paths,
                       capture_output=True, timeout=60)
    assert r.returncode == 0, r.stderr.decode()
    return json.loads(r.stdout)


def wait_dead(pid, timeout=10):
    """Wait for pid to be gone (or a zombie: its files are closed); the
    time it was seen so."""
    end = time.time() + timeout
    while time.time() < end:
        try:
            with open("/proc/%d/stat" % pid) as f:
                if f.read().rsplit(")", 1)[1].split()[0] == "Z":
                    break
        except OSError:
            break
        time.sleep(0.001)
    return time.time()


def status(pid):
    out = {}
    with open("/proc/%d/status" % pid) as f:
        for line in f:
            k, _, v = line.partition(":")
            out[k] = v.split()
    return out
