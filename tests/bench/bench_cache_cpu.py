#!/usr/bin/env python3
"""bench_cache_cpu.py WORK [MIB] [ROUNDS]: what the node cache costs a cold
read, in time and in the daemon's CPU, for two builds of stfs side by side.

A file of MIB MiB (default 1024) in tensors of 64 MiB is served by nginx on
127.0.0.1 (no pacing: the CPU is the limit, as on a fast link).  Each
round, in turn A B B A (STFS_A, then STFS_B, default both $STFS), each
build mounts it fresh with an empty cache (and once with -o nocache) and
`cat`s every tensor file in file order; the daemon's CPU time (all its
threads, from /proc) and the wall time are taken.  Prints MB/s and the
daemon's ns of CPU per byte, medians and spreads over the rounds, and the
ratios of B to A per round.
"""
import os
import shutil
import statistics
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path[:0] = [HERE] + [os.path.join(os.path.dirname(HERE), d)
                         for d in ("fixtures", "servers")]
import stfstest as T  # noqa: E402
from fixtures import Nginx  # noqa: E402
from bench_metrics import cpu_s  # noqa: E402

MiB = 1 << 20


def one(stfs, url, mnt, names, cache, extra):
    shutil.rmtree(cache, ignore_errors=True)
    os.makedirs(cache, mode=0o700)
    opts = ("cache=" + cache) if not extra else extra
    T.STFS = stfs
    p = T.mount_fg(url, mnt, "-o", opts)
    try:
        t = time.monotonic()
        n = 0
        for name in names:
            with open(os.path.join(mnt, name), "rb") as f:
                while True:
                    b = f.read(1 << 20)
                    if not b:
                        break
                    n += len(b)
        wall = time.monotonic() - t
        cpu = cpu_s(p.pid)
    finally:
        T.stop_fg(p, mnt)
    return n / wall / 1e6, cpu * 1e9 / n


def main():
    work = sys.argv[1]
    mib = int(sys.argv[2]) if len(sys.argv) > 2 else 1024
    rounds = int(sys.argv[3]) if len(sys.argv) > 3 else 3
    a = os.environ.get("STFS_A", os.environ.get("STFS"))
    b = os.environ.get("STFS_B", a)
    os.makedirs(work, exist_ok=True)
    data, mnt = os.path.join(work, "data"), os.path.join(work, "mnt")
    os.makedirs(data, exist_ok=True)
    os.makedirs(mnt, exist_ok=True)
    n = max(1, mib // 64)
    chunk = os.urandom(1 << 20)
    tensors = [("t.%03d" % i, "U8", [64 * MiB], chunk * 64)
               for i in range(n)]
    T.write_st(os.path.join(data, "m.safetensors"), tensors)
    del tensors
    names = ["t/%03d" % i for i in range(n)]
    ngx = Nginx(os.path.join(work, "ngx"), data)
    res = {}
    try:
        url = ngx.url("m.safetensors")
        for r in range(rounds):
            order = (("A", a), ("B", b)) if r % 2 == 0 else \
                (("B", b), ("A", a))
            for tag, stfs in order:
                for mode, extra in (("cache", ""), ("nocache", "nocache")):
                    got = one(stfs, url, mnt, names,
                              os.path.join(work, "cache"), extra)
                    res.setdefault((tag, mode), []).append(got)
                    print("round %d %s %-7s %7.1f MB/s %5.2f ns/B" %
                          ((r + 1, tag, mode) + got), flush=True)
    finally:
        ngx.stop()
        T.unmount(mnt)
    print("\n| %d MiB cold `cat`, medians (spread) | MB/s | daemon CPU "
          "ns/byte |\n|---|---|---|" % mib)
    for key in sorted(res):
        v = res[key]
        mbs, ns = [x[0] for x in v], [x[1] for x in v]
        print("| %s %s | %.0f (%.0f-%.0f) | %.2f (%.2f-%.2f) |" %
              (key[0], key[1], statistics.median(mbs), min(mbs), max(mbs),
               statistics.median(ns), min(ns), max(ns)))
    for mode in ("cache", "nocache"):
        ra = [bb[0] / aa[0] for aa, bb in zip(res[("A", mode)],
                                              res[("B", mode)])]
        rc = [bb[1] / aa[1] for aa, bb in zip(res[("A", mode)],
                                              res[("B", mode)])]
        print("B/A %s: MB/s %.2fx (%.2f-%.2f), CPU a byte %.2fx (%.2f-%.2f)"
              % (mode, statistics.median(ra), min(ra), max(ra),
                 statistics.median(rc), min(rc), max(rc)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
