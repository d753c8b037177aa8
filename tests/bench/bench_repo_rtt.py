#!/usr/bin/env python3
"""bench_repo_rtt.py: how long an hf:// mount of a 200-file repository
takes over a link with RTT round trips, in round trips, beside the mount
of the same repository's one weight file alone (the listing, the
revision, the shard: the mount's fixed cost), in one run
(docs/performance.md, "A repository far away").

The Hub as huggingface.co answers: an edge (nginx) that serves a file
not in LFS from /resolve itself, with keep-alive connections, and hands
the API and LFS files' /resolve (a redirect) to the Hub emulator
(tests/servers/hubemu.py, 1,000 tree entries a page) behind it; the nginx the
redirects go to.  The edge and that nginx each behind a delaying proxy of
the tests' own (tests/servers/delayproxy.py: RTT/2 each way, and a round trip
more for a new connection).  (The emulator alone, a Python server, takes
some 3 ms of CPU a request: 200 of them would measure it, not the
round trips.)  Two repositories:
  org/one    model.safetensors alone;
  org/many   the same and 199 small files (config, tokenizer, 197 JSON
             files of 1-4 KiB in folders): all fetched and verified at
             mount (the small-file rule, docs/remote.md).
Each round, with the proxies delaying RTT and then 0 (what the same mount
costs without the link: the machine's own time), mounts each with an
empty cache (on /dev/shm, or CACHE_TOP:
creating a cache's files on a disk is not what this measures) and times `stfs mount -f`
from its start to the mount point's appearing.  Prints the medians of
ROUNDS, in milliseconds and round trips, the difference (what the 199
small files cost, the issue's target: at most 3 round trips), and the
requests each mount made.  With BEFORE (another stfs binary, e.g. one
built from main), its figures too.

Usage: tests/bench/bench_repo_rtt.py WORKDIR [ROUNDS] [RTT_MS] [BEFORE]
"""
import json
import os
import statistics
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path[:0] = [HERE] + [os.path.join(os.path.dirname(HERE), d)
                         for d in ("fixtures", "servers")]
import stfstest as T  # noqa: E402
from delayproxy import DelayProxy  # noqa: E402
from fixtures import Nginx, World  # noqa: E402
import hubemu  # noqa: E402
from repofix import st_bytes, _arrays  # noqa: E402


def many_files():
    """{path: bytes}: 199 small files as a repository has them."""
    j = lambda o: json.dumps(o, indent=1).encode()  # noqa: E731
    files = {"config.json": j({"model_type": "llama", "hidden_size": 8}),
             "tokenizer.json": j({"model": {"vocab": {
                 "t%d" % i: i for i in range(200)}}})}
    for i in range(197):
        files["extra/%02d/file_%03d.json" % (i % 10, i)] = j(
            {"i": i, "pad": "x" * (1024 + 16 * i)})
    return files


def edge(d, hub):
    """nginx in front of the Hub emulator: small files' /resolve served
    from the folder the emulator keeps every commit's files in, the rest
    passed to the emulator."""
    up = "proxy_pass http://127.0.0.1:%d;" % hub.port
    lfs = "|".join(x.lstrip(".") for x in hubemu.LFS)
    return Nginx(d, hub.root, extra="""
    location /api/ { %s }
    location ~ "^/[^/]+/[^/]+/resolve/.+[.](%s)$" { %s }
    location ~ "^/([^/]+/[^/]+)/resolve/([0-9a-f]{40})/(.+)$" {
        alias %s/$1/$2/$3;
    }
""" % (up, lfs, up, hub.root))


def requests(*logs):
    n = 0
    for path in logs:
        with open(path) as f:
            n += len(f.read().splitlines())
    return n


def mount_time(src, mnt, work, tag, cache_top):
    """Seconds from `stfs mount -f` to the mount point's appearing, with
    an empty cache (in cache_top); the mount is then stopped."""
    cache = os.path.join(cache_top, "cache-" + tag)
    subprocess.run(["rm", "-rf", cache])
    log = open(os.path.join(work, tag + ".log"), "ab")
    t = time.time()
    p = subprocess.Popen([T.STFS, "mount", "-f", "-o", "cache=" + cache,
                          src, mnt], stdout=log, stderr=subprocess.STDOUT)
    log.close()
    T._procs.append(p)
    T._mounts.append(mnt)
    while not T.is_mount(mnt):
        if p.poll() is not None or time.time() - t > 60:
            raise AssertionError("mount of %s failed (%s.log)" % (src, tag))
        time.sleep(0.001)
    secs = time.time() - t
    T.unmount(mnt)
    assert p.wait(timeout=20) == 0
    subprocess.run(["rm", "-rf", cache])
    return secs


def main():
    work = sys.argv[1]
    rounds = int(sys.argv[2]) if len(sys.argv) > 2 else 5
    rtt = float(sys.argv[3]) / 1000 if len(sys.argv) > 3 else 0.020
    before = sys.argv[4] if len(sys.argv) > 4 else None
    mnt, d = T.bench_dirs(work)
    # the caches on a tmpfs: a cache on a disk costs the mount an inode
    # or two a file, which this measures no more than the disk
    cache_top = os.environ.get("CACHE_TOP", "/dev/shm" if os.path.isdir(
        "/dev/shm") else work)
    cache_top = os.path.join(cache_top, "bench_repo_rtt-%d" % os.getpid())
    os.makedirs(cache_top, mode=0o700)
    stfs = T.STFS
    bins = [("after", stfs)] + ([("before", before)] if before else [])
    res = {(b, r, f): [] for b, _ in bins for r in ("one", "many")
           for f in (rtt, 0)}
    reqs = {}
    with World(d) as w:
        w.hub.page = 1000
        weight = st_bytes(_arrays(1, ["a.weight", "b.weight"]))
        w.hub.push(w.hub.repo("org/one"), {"model.safetensors": weight})
        w.hub.push(w.hub.repo("org/many"), dict(
            many_files(), **{"model.safetensors": weight}))
        e = edge(os.path.join(d, "edge"), w.hub)
        logs = [os.path.join(e.d, "access.log"),
                os.path.join(w.ngx.d, "access.log")]
        for r in range(rounds):
            for far in (rtt, 0):
                with DelayProxy(e.port, far) as hp, \
                        DelayProxy(w.ngx.port, far, host=w.ngx.host) as np_:
                    os.environ["HF_ENDPOINT"] = hp.url
                    w.hub.files_url = np_.url
                    for b, exe in bins:
                        T.STFS = exe
                        for repo in ("one", "many"):
                            n0 = requests(*logs)
                            secs = mount_time(
                                "hf://org/" + repo, mnt, work,
                                "%s-%s" % (b, repo), cache_top)
                            res[(b, repo, far)].append(secs)
                            reqs[(b, repo)] = requests(*logs) - n0
                            print("round %d RTT %2.0f ms %-6s %-4s %7.1f ms "
                                  "%d requests" % (
                                      r + 1, far * 1000, b, repo,
                                      secs * 1000, reqs[(b, repo)]),
                                  flush=True)
        e.stop()
    T.STFS = stfs
    print("\n| hf:// mount, empty cache (median of %d) | RTT %.0f ms | "
          "RTT 0 | requests |\n|---|---|---|---|" % (rounds, rtt * 1000))
    med = {k: statistics.median(v) for k, v in res.items()}
    for b, _ in bins:
        tag = "" if b == "after" else " (BEFORE)"
        cost = {}
        for repo, name in (("one", "org/one: the weight alone"),
                           ("many", "org/many: + 199 small files")):
            print("| %s%s | %.0f ms | %.0f ms | %d |" % (
                name, tag, med[(b, repo, rtt)] * 1000,
                med[(b, repo, 0)] * 1000, reqs[(b, repo)]))
        for far in (rtt, 0):
            cost[far] = statistics.median(m - o for o, m in zip(
                res[(b, "one", far)], res[(b, "many", far)]))
        print("| the 199 small files' cost%s | %.0f ms | %.0f ms | |" % (
            tag, cost[rtt] * 1000, cost[0] * 1000))
        print("| round trips they add%s: (cost at RTT - cost at 0) / RTT "
              "| %.1f | | |" % (tag, (cost[rtt] - cost[0]) / rtt))
    subprocess.run(["rm", "-rf", d, cache_top])


if __name__ == "__main__":
    T.require_fuse()
    try:
        main()
    finally:
        T._cleanup()
