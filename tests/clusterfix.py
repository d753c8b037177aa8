"""clusterfix.py: a one-node Kubernetes cluster from upstream parts, for
tests/test_cluster.py (and by hand: `python3 tests/clusterfix.py`, which
starts it, prints each step's time and stops it).

Everything runs as root inside namespaces of its own that the calling
process enters first (enter(): it runs itself again under `unshare
--mount --net --pid --fork`, as the new PID namespace's init):
- the network: only lo, up, with 127.0.0.1/8 and the node's address
  192.0.2.1 (TEST-NET-1, on no wire); every server the tests start is in
  here too, so nothing of the cluster is reachable from, or clashes with,
  the machine's other users;
- the mounts: private to the namespace, then made shared inside it (the
  DaemonSet's Bidirectional propagation needs a shared mount); a tmpfs on
  /run, this run's folders bound on /var/lib/kubelet and
  /var/cache/stfs-csi (the manifests' hostPaths), and kubelet's kernel
  tunables read from files of ours (kubelet would otherwise write the
  shared kernel's vm.overcommit_memory and kernel.panic_on_oops);
- the processes: when the init exits, the kernel kills every process left
  in its PID namespace, and its mounts go with the namespace.  The one
  thing outside is kubelet's cgroup root (/stfs-cluster-PID in each
  hierarchy), which stop() removes.

The parts: etcd (Debian's etcd-server), kube-apiserver,
kube-controller-manager, kube-scheduler (the DaemonSet's pods are
scheduled), kubelet and kubectl built by tests/cluster/build.sh from the
pinned k8s.io/kubernetes, containerd and runc (Debian's), the CNI loopback
and bridge plugins (pods off the host network get an address on a bridge
inside the namespace).
Certificates and the service-account key are made with openssl at start.
"""
import json
import os
import shutil
import subprocess
import sys
import time
import urllib.request

HERE = os.path.dirname(os.path.abspath(__file__))
CACHE = os.environ.get("STFS_CLUSTER_CACHE", "/var/cache/stfs-cluster")
NODE = "stfs-node"
NODE_IP = "192.0.2.1"
API = "https://127.0.0.1:6443"
ETCD = "http://127.0.0.1:2379"
NSVAR = "STFS_CLUSTER_NS"
# what kubelet wants the kernel's tunables to be (it writes them otherwise)
TUNABLES = {"vm/overcommit_memory": "1", "vm/panic_on_oom": "0",
            "kernel/panic": "10", "kernel/panic_on_oops": "1",
            "kernel/keys/root_maxkeys": "1000000",
            "kernel/keys/root_maxbytes": "25000000"}
CGROUPS = "/sys/fs/cgroup"


def log(msg):
    print("cluster: " + msg, flush=True)


def enter():
    """Run this program again as the init of new mount, network and PID
    namespaces (unless it is that already); returns in the namespaces."""
    if os.getpid() == 1 and os.environ.get(NSVAR) == "init":
        os.environ[NSVAR] = "in"
        sh("mount", "--make-rshared", "/")
        sh("ip", "link", "set", "lo", "up")
        sh("ip", "addr", "add", NODE_IP + "/32", "dev", "lo")
        return
    if os.environ.get(NSVAR) == "in":
        return
    env = dict(os.environ, **{NSVAR: "init"})
    r = subprocess.run(["unshare", "--mount", "--net", "--pid", "--fork",
                        "--mount-proc", "--propagation", "private",
                        "--kill-child",
                        sys.executable] + sys.argv, env=env)
    sys.exit(r.returncode)


def inside():
    """Is this process the init of enter()'s namespaces?"""
    return os.getpid() == 1 and os.environ.get(NSVAR) in ("init", "in")


def sh(*argv, **kw):
    kw.setdefault("check", True)
    return subprocess.run(argv, **kw)


def binaries():
    """The Kubernetes binaries (built once into the cache) and the
    images' folder."""
    t = time.time()
    r = sh("bash", os.path.join(HERE, "cluster", "build.sh"),
           "kube-apiserver", "kube-controller-manager", "kube-scheduler",
           "kubelet", "kubectl", capture_output=True, text=True)
    k8s = r.stdout.strip()
    r = sh("bash", os.path.join(HERE, "cluster", "images.sh"),
           capture_output=True, text=True)
    images = r.stdout.strip()
    log("binaries and images ready in %.1f s (%s)" % (time.time() - t, k8s))
    return k8s, images


class Cluster:
    """The node, started in __init__ (inside enter()'s namespaces), stopped
    by stop().  d: this run's folder.  step(name) times what follows."""

    def __init__(self, d, images=()):
        self.d = d
        self.procs = []
        self.times = []
        self.cgroup = "/stfs-cluster-%d" % os.getppid()
        self.made = []
        self.bin, self.images = binaries()
        try:
            self._start(list(images))
        except BaseException:
            self.stop()
            raise

    # -- helpers -------------------------------------------------------
    def path(self, *p):
        return os.path.join(self.d, *p)

    def step(self, name, t0):
        dt = time.time() - t0
        self.times.append((name, dt))
        log("%-28s %6.1f s" % (name, dt))

    def spawn(self, name, argv, env=None):
        out = open(self.path("logs", name + ".log"), "ab")
        p = subprocess.Popen(argv, stdout=out, stderr=subprocess.STDOUT,
                             stdin=subprocess.DEVNULL,
                             env=dict(os.environ, **(env or {})))
        out.close()
        self.procs.append((name, p))
        return p

    def logtail(self, name, n=4000):
        try:
            with open(self.path("logs", name + ".log"), "rb") as f:
                return f.read()[-n:].decode(errors="replace")
        except OSError:
            return ""

    def wait(self, what, cond, timeout=120, proc=None):
        end = time.time() + timeout
        while True:
            if cond():
                return
            if proc is not None and proc[1].poll() is not None:
                raise AssertionError("%s exited (%s): %s" % (
                    proc[0], proc[1].returncode, self.logtail(proc[0])))
            if time.time() > end:
                raise AssertionError("%s: not within %d s%s" % (
                    what, timeout, (": " + self.logtail(proc[0]))
                    if proc else ""))
            time.sleep(0.2)

    def kubectl(self, *args, check=True, input=None, timeout=120):
        r = subprocess.run([os.path.join(self.bin, "kubectl"),
                            "--kubeconfig", self.path("admin.kubeconfig")]
                           + list(args), capture_output=True, text=True,
                           input=input, timeout=timeout)
        if check and r.returncode:
            raise AssertionError("kubectl %s: %s%s" % (
                " ".join(args), r.stdout[-2000:], r.stderr[-2000:]))
        return r

    def get(self, *args):
        return json.loads(self.kubectl("get", "-o", "json", *args).stdout)

    def ctr(self, *args, **kw):
        return sh("ctr", "--address", "/run/stfs-containerd/containerd.sock",
                  "-n", "k8s.io", *args, **kw)

    # -- start ---------------------------------------------------------
    def _start(self, images):
        t = time.time()
        for n in ("logs", "pki", "kubelet", "csi-cache", "containerd",
                  "cni"):
            os.makedirs(self.path(n), exist_ok=True)
        self._namespace()
        self.step("namespaces", t)
        t = time.time()
        self._pki()
        self.step("certificates", t)

        t = time.time()
        etcd = ("etcd", self.spawn("etcd", [
            "etcd", "--name", "stfs", "--data-dir", "/run/stfs-etcd",
            "--listen-client-urls", ETCD, "--advertise-client-urls", ETCD,
            "--listen-peer-urls", "http://127.0.0.1:2380",
            "--initial-advertise-peer-urls", "http://127.0.0.1:2380",
            "--initial-cluster", "stfs=http://127.0.0.1:2380",
            "--listen-metrics-urls", "http://127.0.0.1:2381"]))
        self.wait("etcd", lambda: sh("etcdctl", "--endpoints", ETCD,
                                     "endpoint", "health",
                                     capture_output=True,
                                     check=False).returncode == 0,
                  proc=etcd)
        self.step("etcd", t)

        t = time.time()
        pki = self.path("pki")
        api = ("kube-apiserver", self.spawn("kube-apiserver", [
            os.path.join(self.bin, "kube-apiserver"),
            "--etcd-servers", ETCD, "--bind-address", "0.0.0.0",
            "--secure-port", "6443", "--advertise-address", NODE_IP,
            "--service-cluster-ip-range", "198.18.128.0/24",
            "--client-ca-file", pki + "/ca.crt",
            "--tls-cert-file", pki + "/apiserver.crt",
            "--tls-private-key-file", pki + "/apiserver.key",
            "--kubelet-client-certificate", pki + "/apiserver-kubelet.crt",
            "--kubelet-client-key", pki + "/apiserver-kubelet.key",
            "--service-account-issuer", "https://kubernetes.default.svc",
            "--service-account-key-file", pki + "/sa.key",
            "--service-account-signing-key-file", pki + "/sa.key",
            "--kubelet-preferred-address-types", "InternalIP",
            "--authorization-mode", "Node,RBAC",
            "--enable-admission-plugins", "NodeRestriction",
            "--allow-privileged=true", "--profiling=false"]))
        self.wait("kube-apiserver /readyz", lambda: self.kubectl(
            "get", "--raw", "/readyz", check=False).returncode == 0,
            timeout=180, proc=api)
        self.step("kube-apiserver", t)

        t = time.time()
        cm = ("kube-controller-manager", self.spawn(
            "kube-controller-manager", [
                os.path.join(self.bin, "kube-controller-manager"),
                "--kubeconfig", self.path("controller-manager.kubeconfig"),
                "--leader-elect=false", "--secure-port=0",
                # the PV binder's sync every 2 s, not 15: a claim binds
                # in seconds (test_s3_pv)
                "--pvclaimbinder-sync-period=2s",
                "--service-account-private-key-file", pki + "/sa.key",
                "--root-ca-file", pki + "/ca.crt",
                "--use-service-account-credentials=true"]))
        sched = ("kube-scheduler", self.spawn("kube-scheduler", [
            os.path.join(self.bin, "kube-scheduler"),
            "--kubeconfig", self.path("scheduler.kubeconfig"),
            "--leader-elect=false", "--secure-port=0"]))
        self.wait("the default service account", lambda: self.kubectl(
            "get", "serviceaccount", "default", check=False).returncode == 0,
            proc=cm)
        if sched[1].poll() is not None:
            raise AssertionError("kube-scheduler: " +
                                 self.logtail("kube-scheduler"))
        self.step("controller-manager+scheduler", t)

        t = time.time()
        self._containerd()
        self.step("containerd", t)
        t = time.time()
        for img in [os.path.join(self.images, n + ".oci.tar") for n in (
                "pause", "workload")] + images:
            r = self.ctr("images", "import", "--snapshotter", "native",
                         img, capture_output=True, text=True, check=False)
            assert r.returncode == 0, "import %s: %s" % (img, r.stderr)
        self.step("images imported", t)

        t = time.time()
        self.start_kubelet()
        self.step("kubelet, node Ready", t)

    def _namespace(self):
        sh("mount", "-t", "tmpfs", "-o", "mode=0755", "tmpfs", "/run")
        for host, mine in (("/var/lib/kubelet", "kubelet"),
                           ("/var/cache/stfs-csi", "csi-cache")):
            if not os.path.isdir(host):
                os.makedirs(host)
                self.made.append(host)
            sh("mount", "--bind", self.path(mine), host)
        os.makedirs(self.path("sysctl"), exist_ok=True)
        for name, value in TUNABLES.items():
            f = self.path("sysctl", name.replace("/", "."))
            with open(f, "w") as out:
                out.write(value + "\n")
            sh("mount", "--bind", f, "/proc/sys/" + name)
        for h in sorted(os.listdir(CGROUPS)):
            top = os.path.join(CGROUPS, h)
            if h == "unified" or not os.path.ismount(top):
                continue
            mine = top + self.cgroup
            os.makedirs(mine, exist_ok=True)
            if h == "cpuset":
                for k in ("cpuset.cpus", "cpuset.mems"):
                    with open(os.path.join(top, k)) as f:
                        v = f.read()
                    with open(os.path.join(mine, k), "w") as f:
                        f.write(v)

    def _pki(self):
        pki = self.path("pki")

        def key(name):
            sh("openssl", "ecparam", "-name", "prime256v1", "-genkey",
               "-noout", "-out", os.path.join(pki, name + ".key"))

        def cert(name, subj, ext):
            key(name)
            csr = os.path.join(pki, name + ".csr")
            sh("openssl", "req", "-new", "-key", os.path.join(
                pki, name + ".key"), "-subj", subj, "-out", csr)
            extf = os.path.join(pki, name + ".ext")
            with open(extf, "w") as f:
                f.write(ext)
            sh("openssl", "x509", "-req", "-in", csr, "-CA",
               os.path.join(pki, "ca.crt"), "-CAkey",
               os.path.join(pki, "ca.key"), "-CAcreateserial", "-days", "2",
               "-extfile", extf, "-out", os.path.join(pki, name + ".crt"),
               capture_output=True)
        key("ca")
        sh("openssl", "req", "-x509", "-new", "-key", pki + "/ca.key",
           "-subj", "/CN=stfs-test-ca", "-days", "2",
           "-out", pki + "/ca.crt")
        key("sa")
        client = "extendedKeyUsage=clientAuth\n"
        cert("apiserver", "/CN=kube-apiserver",
             "extendedKeyUsage=serverAuth\nsubjectAltName=IP:127.0.0.1,"
             "IP:%s,IP:198.18.128.1,DNS:localhost,DNS:kubernetes,"
             "DNS:kubernetes.default,DNS:kubernetes.default.svc\n" % NODE_IP)
        cert("apiserver-kubelet", "/O=system:masters/CN=kube-apiserver",
             client)
        cert("kubelet-serving", "/CN=" + NODE,
             "extendedKeyUsage=serverAuth\nsubjectAltName=IP:%s,DNS:%s\n"
             % (NODE_IP, NODE))
        for name, subj in (
                ("admin", "/O=system:masters/CN=stfs-test-admin"),
                ("controller-manager", "/CN=system:kube-controller-manager"),
                ("scheduler", "/CN=system:kube-scheduler"),
                ("kubelet", "/O=system:nodes/CN=system:node:" + NODE)):
            cert(name, subj, client)
            with open(self.path(name + ".kubeconfig"), "w") as f:
                json.dump({
                    "apiVersion": "v1", "kind": "Config",
                    "clusters": [{"name": "stfs", "cluster": {
                        "server": API,
                        "certificate-authority": pki + "/ca.crt"}}],
                    "users": [{"name": name, "user": {
                        "client-certificate": pki + "/%s.crt" % name,
                        "client-key": pki + "/%s.key" % name}}],
                    "contexts": [{"name": "stfs", "context": {
                        "cluster": "stfs", "user": name}}],
                    "current-context": "stfs"}, f)

    def _containerd(self):
        cd = self.path("containerd")
        # pods off the host network: a bridge in this network namespace,
        # addresses of 198.18.0.0/24 (the benchmarking range: on no wire)
        with open(self.path("cni", "10-pods.conflist"), "w") as f:
            json.dump({"cniVersion": "0.4.0", "name": "pods",
                       "plugins": [{
                           "type": "bridge", "bridge": "stfs0",
                           "isGateway": True, "ipMasq": False,
                           "ipam": {"type": "host-local",
                                    "dataDir": self.path("cni", "ipam"),
                                    "ranges": [[{"subnet":
                                                 "198.18.0.0/24"}]]}}]},
                      f)
        cri = 'plugins."io.containerd.grpc.v1.cri"'
        with open(self.path("containerd.toml"), "w") as f:
            f.write("""version = 2
root = "%(cd)s/root"
state = "/run/stfs-containerd/state"
[grpc]
  address = "/run/stfs-containerd/containerd.sock"
[ttrpc]
  address = "/run/stfs-containerd/containerd.sock.ttrpc"
[%(cri)s]
  sandbox_image = "stfs.test/pause:1"
  stream_server_address = "127.0.0.1"
  # no container below containerd's own oom_score_adj: lowering it needs
  # CAP_SYS_RESOURCE, which root has not on every machine (this one's)
  restrict_oom_score_adj = true
  [%(cri)s.containerd]
    snapshotter = "native"
    default_runtime_name = "runc"
    [%(cri)s.containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
  [%(cri)s.cni]
    bin_dir = "/usr/lib/cni"
    conf_dir = "%(cni)s"
""" % {"cd": cd, "cri": cri, "cni": self.path("cni")})
        p = ("containerd", self.spawn("containerd", [
            "containerd", "--config", self.path("containerd.toml")]))
        self.wait("containerd", lambda: self.ctr(
            "version", capture_output=True, check=False).returncode == 0,
            proc=p)

    def start_kubelet(self):
        pki = self.path("pki")
        sock = "unix:///run/stfs-containerd/containerd.sock"
        with open(self.path("resolv.conf"), "w") as f:
            f.write("")
        with open(self.path("kubelet.yaml"), "w") as f:
            json.dump({
                "apiVersion": "kubelet.config.k8s.io/v1beta1",
                "kind": "KubeletConfiguration",
                "address": NODE_IP, "port": 10250, "readOnlyPort": 0,
                "healthzBindAddress": "127.0.0.1", "healthzPort": 10248,
                "authentication": {"anonymous": {"enabled": False},
                                   "webhook": {"enabled": True},
                                   "x509": {"clientCAFile":
                                            pki + "/ca.crt"}},
                "authorization": {"mode": "Webhook"},
                "tlsCertFile": pki + "/kubelet-serving.crt",
                "tlsPrivateKeyFile": pki + "/kubelet-serving.key",
                "cgroupDriver": "cgroupfs", "cgroupRoot": self.cgroup,
                "failSwapOn": False, "failCgroupV1": False,
                "containerRuntimeEndpoint": sock,
                "imageServiceEndpoint": sock,
                "evictionHard": {"memory.available": "1Mi",
                                 "nodefs.available": "1%",
                                 "nodefs.inodesFree": "1%",
                                 "imagefs.available": "1%"},
                "imageGCHighThresholdPercent": 100,
                "imageGCLowThresholdPercent": 99,
                "protectKernelDefaults": False,
                "resolvConf": self.path("resolv.conf"),
                "localStorageCapacityIsolation": False,
                "serializeImagePulls": False,
                # a running pod's sync, and so kubelet's publish again of
                # a requiresRepublish volume: every 10 s, not every minute
                "syncFrequency": "10s"}, f)
        self.kubelet = ("kubelet", self.spawn("kubelet", [
            os.path.join(self.bin, "kubelet"),
            "--config", self.path("kubelet.yaml"),
            "--kubeconfig", self.path("kubelet.kubeconfig"),
            "--root-dir", "/var/lib/kubelet", "--hostname-override", NODE,
            "--node-ip", NODE_IP, "--v", "2"]))

        def ready():
            r = self.kubectl("get", "node", NODE, "-o", "json", check=False)
            if r.returncode:
                return False
            conds = json.loads(r.stdout)["status"].get("conditions", [])
            return any(c["type"] == "Ready" and c["status"] == "True"
                       for c in conds)
        def healthy():
            try:
                with urllib.request.urlopen(
                        "http://127.0.0.1:10248/healthz", timeout=5) as r:
                    return r.read() == b"ok"
            except OSError:
                return False
        self.wait("kubelet's /healthz", healthy, timeout=180,
                  proc=self.kubelet)
        self.wait("node Ready", ready, timeout=180, proc=self.kubelet)

    def stop_kubelet(self):
        name, p = self.kubelet
        p.terminate()
        try:
            p.wait(30)
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait()
        self.procs.remove(self.kubelet)

    # -- stop ----------------------------------------------------------
    def stop(self):
        """Pods' containers, then every part in reverse; the mounts and
        processes of the namespaces go when their init exits, the cgroup
        root is removed here."""
        t = time.time()
        if any(n == "containerd" for n, _ in self.procs):
            r = self.ctr("tasks", "ls", "-q", capture_output=True,
                         text=True, check=False)
            for tid in r.stdout.split():
                self.ctr("tasks", "kill", "-s", "SIGKILL", tid,
                         capture_output=True, check=False)
        for name, p in reversed(self.procs):
            p.terminate()
            try:
                p.wait(20)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()
        self.procs = []
        self._kill_rest()
        sh("umount", "-R", "-l", "/var/lib/kubelet", check=False,
           capture_output=True)
        sh("umount", "-R", "-l", "/var/cache/stfs-csi", check=False,
           capture_output=True)
        for host in self.made:
            try:
                os.rmdir(host)
            except OSError:
                pass
        self._rm_cgroups()
        self.step("stop", t)

    def _kill_rest(self):
        """Every other process of the PID namespace (shims, containers'
        processes, stfs daemons), as its init would at exit, so that the
        cgroups empty now."""
        me = os.getpid()
        for _ in range(50):
            left = [int(p) for p in os.listdir("/proc")
                    if p.isdigit() and int(p) != me]
            if not left:
                return
            for p in left:
                try:
                    os.kill(p, 9)
                except OSError:
                    pass
            try:
                while os.waitpid(-1, os.WNOHANG)[0]:
                    pass
            except ChildProcessError:
                pass
            time.sleep(0.1)

    def _rm_cgroups(self):
        for h in sorted(os.listdir(CGROUPS)):
            mine = os.path.join(CGROUPS, h) + self.cgroup
            if not os.path.isdir(mine):
                continue
            for top, dirs, _ in sorted(os.walk(mine), reverse=True,
                                       key=lambda x: x[0].count("/")):
                try:
                    os.rmdir(top)
                except OSError as e:
                    log("cgroup %s: %s" % (top, e))


def main():
    import tempfile
    enter()
    d = tempfile.mkdtemp(prefix="stfs-cluster-")
    c = Cluster(d)
    try:
        print(c.kubectl("get", "nodes", "-o", "wide").stdout)
    finally:
        c.stop()
        shutil.rmtree(d, ignore_errors=True)


if __name__ == "__main__":
    main()
