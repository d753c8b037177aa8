"""netns.py: "nodes" in network namespaces of their own, for the fleet
tests and benchmarks (test_mirror.py, bench/bench_mirror.py).

Each node is a network namespace (`ip netns add`) joined to a bridge of
the host's by a veth pair: its only way out is that link.  The servers
the tests start listen on the host's loopback (127.0.0.x:P); a relay in
the host's namespace listens on the bridge's address and reaches them,
and a relay in each node's namespace listens on 127.0.0.x:P there and
goes over the link to the host's relay.  So the URLs the tests hand out
(HF_ENDPOINT, the CDN's redirects, AWS_ENDPOINT_URL) are the same in
every namespace, and every byte a node reads crosses its own veth pair
(its counters say so: Fleet.rx_bytes).  A daemon runs in its node's
namespace with `nsenter --net=...` (Fleet.wrap(i)), in the test's mount
namespace, so that its FUSE mount is the test's to read.

Root only (ip, nsenter).  Names carry the test's pid; close() removes the
namespaces, the bridge and the relays.
"""
import os
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
RELAY = os.path.join(HERE, "netrelay.py")


def _ip(*args):
    subprocess.run(["ip"] + list(args), check=True, capture_output=True)


def _subnet():
    """A /24 of 10.x.y.0 that no route of the host's names."""
    routes = subprocess.run(["ip", "-4", "route", "show"],
                            capture_output=True, text=True).stdout
    pid = os.getpid()
    for k in range(200):
        a, b = 200 + (pid + k) % 50, (pid // 50 + k) % 250
        net = "10.%d.%d." % (a, b)
        if net not in routes:
            return net
    raise AssertionError("no free 10.x.y.0/24 for the nodes' bridge")


def available():
    """Why nodes cannot have namespaces here, or None."""
    if os.geteuid() != 0:
        return "not root"
    for tool in ("ip", "nsenter"):
        if subprocess.run(["which", tool], capture_output=True).returncode:
            return "no %s" % tool
    return None


class Fleet:
    """n nodes, each in its own network namespace, reaching the servers
    (host, port) given through relays over its veth pair."""

    def __init__(self, n, servers):
        self.tag = "%04x" % (os.getpid() & 0xFFFF)
        self.bridge = "stfsb" + self.tag
        self.net = _subnet()
        self.gw = self.net + "1"
        self.ns, self.procs, self.veth = [], [], []
        try:
            self._build(n, servers)
        except BaseException:
            self.close()
            raise

    def _build(self, n, servers):
        _ip("link", "add", "name", self.bridge, "type", "bridge")
        _ip("addr", "add", self.gw + "/24", "dev", self.bridge)
        _ip("link", "set", self.bridge, "up")
        for i in range(n):
            ns = "stfs%s-%d" % (self.tag, i)
            host, peer = "vh%s%d" % (self.tag, i), "vn%s%d" % (self.tag, i)
            _ip("netns", "add", ns)
            self.ns.append(ns)
            _ip("link", "add", host, "type", "veth", "peer", "name", peer)
            self.veth.append(host)
            _ip("link", "set", peer, "netns", ns)
            _ip("link", "set", host, "master", self.bridge, "up")
            _ip("-n", ns, "link", "set", "lo", "up")
            _ip("-n", ns, "addr", "add", "%s%d/24" % (self.net, 10 + i),
                "dev", peer)
            _ip("-n", ns, "link", "set", peer, "up")
        # the host's relay: the bridge's address -> the servers
        up = self._relay([], ["%s:0=%s:%d" % (self.gw, h, p)
                              for h, p in servers])
        # each node's: the servers' own address there -> the host's relay
        for ns in self.ns:
            self._relay(["nsenter", "--net=/var/run/netns/" + ns],
                        ["%s:%d=%s:%s" % (h, p, self.gw, q)
                         for (h, p), q in zip(servers, up)])

    def _relay(self, prefix, pairs):
        p = subprocess.Popen(prefix + [sys.executable, RELAY] + pairs,
                             stdout=subprocess.PIPE)
        self.procs.append(p)
        line = p.stdout.readline().split()
        assert len(line) == len(pairs), "a relay did not start"
        return [x.decode() for x in line]

    def wrap(self, i):
        """The argv prefix that runs a command in node i's namespace."""
        return ["nsenter", "--net=/var/run/netns/" + self.ns[i]]

    def rx_bytes(self, i):
        """Bytes node i received over its veth pair so far (the host
        side's transmitted bytes)."""
        with open("/sys/class/net/%s/statistics/tx_bytes" %
                  self.veth[i]) as f:
            return int(f.read())

    def close(self):
        for p in self.procs:
            p.kill()
            p.wait()
            p.stdout.close()
        self.procs = []
        for ns in self.ns:
            subprocess.run(["ip", "netns", "del", ns], capture_output=True)
        self.ns = []
        subprocess.run(["ip", "link", "del", self.bridge],
                       capture_output=True)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
