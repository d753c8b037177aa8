#!/usr/bin/env python3
"""bench_mirror.py [MIB] [ROUNDS] [RATE]: a fleet of 1, 2 and 4 nodes starting
the same model, with and without a mirror (docs/mirror.md,
docs/performance.md "A mirror in the cluster").

The origin is the Hub emulator (tests/servers/hubemu.py) whose files nginx serves
as its CDN behind tests/bench/sharedcap.py: RATE MB/s (default 40) for
all connections together, an origin whose egress is shared and capped (a
popular release on the Hub); the mirror is the tests' Swift on loopback
(uncapped, as a bucket in the cluster is near, but one Python proxy
process: its own rate is part of what is measured).  A model of MIB
MiB (default 64) in one safetensors file, with a config.json.  Each round,
for N in 1, 2, 4:
  - without the mirror: N daemons, each with a cache of its own, mounted
    at once, each reading its tensor whole (all N at once); the time from
    the mounts' start to the last node's last byte, and the bytes nginx
    served (its access log, every range);
  - with it: `stfs mirror` once (its time and the origin's bytes), then
    the same N nodes with -o mirror=: their time, and the origin's bytes
    (the mirror's copy included).
Each node is a daemon in a network namespace of its own (tests/servers/netns.py:
a veth pair to a bridge, and relays, one Python process in the host's
namespace and one in each node's, to the servers on loopback): every byte
crosses the node's own link and two relays.
Medians over the rounds; the ratio is without / with, per round.  Root.
"""
import os
import shutil
import statistics
import subprocess
import sys
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path[:0] = [HERE] + [os.path.join(os.path.dirname(HERE), d)
                         for d in ("fixtures", "servers")]
import stfstest as T  # noqa: E402
import s3server  # noqa: E402
import sharedcap  # noqa: E402
import netns  # noqa: E402
from fixtures import make_model, mount_logged  # noqa: E402
from mirrorfix import Env, origin_bytes  # noqa: E402

MiB = 1 << 20
EXITS = []      # (fleet, the slowest daemon's exit after its unmount, s)


def fleet(d, tag, src, n, opts, fl):
    """n nodes mounted at once, each in its own network namespace of fl,
    each reading its tensor whole: (seconds from the start to the last
    node's last byte)."""
    t0 = time.monotonic()
    nodes, errs = [], []
    for i in range(n):
        mnt = os.path.join(d, "%s-m%d" % (tag, i))
        os.makedirs(mnt)
        o = "cache=" + os.path.join(d, "%s-c%d" % (tag, i))
        if opts:
            o += "," + opts
        nodes.append((mount_logged(src, mnt, os.path.join(
            d, "%s-%d.log" % (tag, i)), "-o", o, wrap=fl.wrap(i)), mnt))

    def read(mnt):
        try:
            with open(os.path.join(mnt, "w"), "rb") as f:
                while f.read(8 * MiB):
                    pass
        except OSError as e:
            errs.append(e)
    th = [threading.Thread(target=read, args=(m,)) for _, m in nodes]
    for t in th:
        t.start()
    for t in th:
        t.join()
    took = time.monotonic() - t0
    # the daemons' exits are not timed above, but watched: one that does
    # not exit in 120 s fails the run (a daemon writes the blocks it has
    # fetched to its cache before it exits: seconds on a busy disk)
    slowest = 0.0
    for i, (p, mnt) in enumerate(nodes):
        t1 = time.monotonic()
        T.unmount(mnt)
        try:
            rc = p.wait(timeout=120)
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait()
            rc = "stuck"
        with open(os.path.join(d, "%s-%d.log" % (tag, i)),
                  errors="replace") as f:
            log = f.read()
        assert rc == 0, "%s node %d: exit %s; its log: %s" % (
            tag, i, rc, log[-2000:])
        slowest = max(slowest, time.monotonic() - t1)
    EXITS.append((tag, slowest))
    assert not errs, errs
    return took


def one_round(d, e, src, data, r, fl):
    out = {}
    total = sum(len(v) for v in data.values())
    for n in (1, 2, 4):
        _, k = origin_bytes(e.w, data)
        t = fleet(d, "r%dn%d-plain" % (r, n), src, n, "", fl)
        b = origin_bytes(e.w, data, k)[0]
        out[("plain", n)] = (t, b / total)
        _, k = origin_bytes(e.w, data)
        t0 = time.monotonic()
        res = subprocess.run([T.STFS, "mirror", "-q", src,
                              "s3://models/bench-r%dn%d" % (r, n)],
                             capture_output=True, text=True)
        assert res.returncode == 0, res
        tm = time.monotonic() - t0
        t = fleet(d, "r%dn%d-mirror" % (r, n), src, n,
                  "mirror=s3://models/bench-r%dn%d" % (r, n), fl)
        b = origin_bytes(e.w, data, k)[0]
        out[("mirror", n)] = (t, b / total, tm)
    return out


def main():
    why = netns.available()
    if why:
        sys.exit("bench_mirror: nodes in namespaces need: %s" % why)
    mib = int(sys.argv[1]) if len(sys.argv) > 1 else 64
    rounds = int(sys.argv[2]) if len(sys.argv) > 2 else 3
    rate = float(sys.argv[3]) if len(sys.argv) > 3 else 40
    d = T.tmpdir()
    relay = None
    try:
        with Env(d) as e:
            relay, port = sharedcap.start(e.w.ngx.host, e.w.ngx.port,
                                          rate * 1e6)
            e.w.hub.files_url = "http://127.0.0.1:%d" % port
            m = make_model(os.path.join(d, "model"), mib * MiB)
            with open(m.path, "rb") as f:
                big = f.read()
            cfg = b'{"model_type": "bench"}\n'
            sha = e.w.hub.push(e.w.hub.repo("org/bench"), {
                "model.safetensors": m, "config.json": cfg})
            data = {"model.safetensors": big, "config.json": cfg}
            src = "hf://org/bench@" + sha
            hp = [u.split("://", 1)[1].split("/", 1)[0].rsplit(":", 1)
                  for u in (e.w.hub.url, e.w.hub.files_url,
                            e.sw.endpoint)]
            with netns.Fleet(4, [(h, int(p)) for h, p in hp]) as fl:
                results = [one_round(d, e, src, data, r, fl)
                           for r in range(rounds)]
        print("bench_mirror: %d MiB model, origin capped at %g MB/s in "
              "all, %d rounds (medians)" % (mib, rate, rounds))
        print("%-6s %-22s %-22s %-10s %s" % (
            "nodes", "without: s, origin x", "with: s, origin x",
            "speed-up", "stfs mirror s"))
        for n in (1, 2, 4):
            p = [r[("plain", n)] for r in results]
            q = [r[("mirror", n)] for r in results]
            up = statistics.median(a[0] / b[0] for a, b in zip(p, q))
            print("%-6d %6.2f s %6.2fx        %6.2f s %6.2fx        "
                  "%5.2fx     %6.2f" % (
                      n, statistics.median(a[0] for a in p),
                      statistics.median(a[1] for a in p),
                      statistics.median(b[0] for b in q),
                      statistics.median(b[1] for b in q), up,
                      statistics.median(b[2] for b in q)))
        worst = max(EXITS, key=lambda x: x[1])
        print("slowest daemon exit after unmount: %.2f s (%s)" % (
            worst[1], worst[0]))
    finally:
        if relay:
            relay.kill()
            relay.wait()
        s3server.stop_shared()
        shutil.rmtree(d, ignore_errors=True)


if __name__ == "__main__":
    main()
