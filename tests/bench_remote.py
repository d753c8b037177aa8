#!/usr/bin/env python3
"""bench_remote.py WORK OUT [ROUNDS]: stfs reading a URL, side by side with
curl in the same run (docs/performance.md, "Remote").

nginx serves the benchmark's file (tests/bench.py makes it) twice on
127.0.0.1: with `limit_rate 100m` per connection, as object stores cap a
connection, and without a limit.  Each round, in turn:
  - curl of the 1 GiB tensor's range over one connection, and over 8
    connections at once (8 range requests covering it);
  - stfs: a fresh mount with an empty cache, reading the tensor from start
    to end (a cold read);
  - unlimited: one curl, and a cold stfs read;
  - a warm read: the same tensor again through a new mount whose cache
    holds it, beside a read through a local mount of the file.
Medians of ROUNDS (default 3) and ratios of medians of per-round ratios
go to OUT/remote.md.
"""
import json
import os
import shutil
import statistics
import subprocess
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import stfstest as T  # noqa: E402
import bench as B  # noqa: E402
from test_remote import Nginx  # noqa: E402

MiB = 1 << 20


def curl(url, first, last):
    r = subprocess.run(["curl", "-sf", "-r", "%d-%d" % (first, last), url,
                        "-o", "/dev/null", "-w", "%{size_download}"],
                       capture_output=True, check=True)
    return int(r.stdout)


def timed(fn, nbytes):
    t = time.perf_counter()
    fn()
    return nbytes / (time.perf_counter() - t)


def main():
    work, out = sys.argv[1], sys.argv[2]
    rounds = int(sys.argv[3]) if len(sys.argv) > 3 else 3
    os.makedirs(out, exist_ok=True)
    src, offs, _, _, _, _ = B.make_data(work)
    boff, bsize = offs["big"]
    d = os.path.join(work, "remote")
    shutil.rmtree(d, ignore_errors=True)
    os.makedirs(d)
    root = os.path.dirname(src)
    name = os.path.basename(src)
    # the limited server: the same config with limit_rate
    lim = Nginx(os.path.join(d, "lim"), root)
    lim.stop()
    with open(lim.conf) as f:
        conf = f.read().replace("root %s;" % root,
                                "root %s;\n    limit_rate 100m;" % root)
    with open(lim.conf, "w") as f:
        f.write(conf)
    lim.start()
    free = Nginx(os.path.join(d, "free"), root)
    mnt = os.path.join(d, "mnt")
    os.makedirs(mnt)
    pin = B.Pin(src)
    R = {k: [] for k in ("curl1", "curl8", "cold", "curl1_free",
                         "cold_free", "warm", "local")}

    def stfs_read(url, cache, fresh=True):
        if fresh:
            shutil.rmtree(cache, ignore_errors=True)
        with B.Mount(mnt, url, "-o", "cache=" + cache) as m:
            return B.read_range(os.path.join(m, "big"))

    def eight(url):
        per = bsize // 8
        th = [threading.Thread(target=curl, args=(
            url, boff + i * per, boff + (i + 1) * per - 1))
            for i in range(8)]
        for t in th:
            t.start()
        for t in th:
            t.join()
    cache = os.path.join(d, "cache")
    try:
        for r in range(rounds + 1):
            vals = {
                "curl1": timed(lambda: curl(lim.url(name), boff,
                                            boff + bsize - 1), bsize),
                "curl8": timed(lambda: eight(lim.url(name)), bsize),
                "cold": stfs_read(lim.url(name), cache),
                "curl1_free": timed(lambda: curl(free.url(name), boff,
                                                 boff + bsize - 1), bsize),
                "cold_free": stfs_read(free.url(name), cache),
                "warm": stfs_read(free.url(name), cache, fresh=False),
            }
            with B.Mount(mnt, src) as m:
                vals["local"] = B.read_range(os.path.join(m, "big"))
            if r == 0:
                continue                # a warm-up round, not counted
            for k, v in vals.items():
                R[k].append(v)
            print("round %d: %s" % (r, ", ".join(
                "%s %.0f MB/s" % (k, v / 1e6) for k, v in vals.items())),
                flush=True)
    finally:
        pin.release()
        lim.stop()
        free.stop()

    def med(k):
        return statistics.median(R[k]) / 1e6

    def ratio(a, b):
        return statistics.median(x / y for x, y in zip(R[a], R[b]))
    rows = [
        ("cold read, 100 MB/s per connection", med("cold"),
         "1 curl %.0f" % med("curl1"), ratio("cold", "curl1"), 4.0),
        ("cold read vs 8 curls in parallel", med("cold"),
         "8 curls %.0f" % med("curl8"), ratio("cold", "curl8"), 0.8),
        ("cold read, no limit", med("cold_free"),
         "1 curl %.0f" % med("curl1_free"), ratio("cold_free", "curl1_free"),
         0.7),
        ("warm read from the disk cache", med("warm"),
         "local mount %.0f" % med("local"), ratio("warm", "local"), 0.8),
    ]
    lines = ["| 1 GiB tensor over HTTP (median of %d, MB/s) | stfs | "
             "baseline | ratio | target |" % rounds, "|---|---|---|---|---|"]
    for name_, v, base, rt, target in rows:
        lines.append("| %s | %.0f | %s | %.2fx | >= %.1fx: %s |" % (
            name_, v, base, rt, target, "met" if rt >= target else
            "**missed**"))
    text = "\n".join(lines) + "\n"
    with open(os.path.join(out, "remote.md"), "w") as f:
        f.write(text)
    with open(os.path.join(out, "remote.json"), "w") as f:
        json.dump(R, f, indent=1)
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
