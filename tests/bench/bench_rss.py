#!/usr/bin/env python3
"""bench_rss.py: the daemon's peak resident memory while one large tensor
streams from a URL, against the in-flight budget docs/remote-cache.md gives.

    STFS=build/src/cli/stfs python3 tests/bench/bench_rss.py WORKDIR [GIB]

Writes a sparse safetensors file of one U8 tensor of GIB GiB (default 4),
serves it with nginx on loopback, and for the cache on and -o nocache
mounts it in the foreground, reads the tensor once in order with 1 MiB
reads (the data must pass through the daemon: a cold read), and prints
the daemon's VmHWM (peak RSS) before and after the read and what the read
added, beside the budget: with the cache, the blocks in flight (96 MiB
with the defaults) and the spare buffers (32 MiB); with nocache, the
prefetched blocks held (64 MiB) and the blocks in flight.  Peak memory
does not depend on the machine's load, so one round is enough.
"""
import json
import os
import struct
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path[:0] = [HERE] + [os.path.join(os.path.dirname(HERE), d)
                         for d in ("fixtures", "servers")]
import stfstest as T  # noqa: E402
from fixtures import Nginx  # noqa: E402

MIB = 1 << 20
BUDGET_CACHE = 96 + 32      # MiB: in flight + spare buffers (defaults)
BUDGET_NOCACHE = 64 + 96 + 32   # MiB: held ahead + in flight + spare


def hwm_kb(pid):
    with open("/proc/%d/status" % pid) as f:
        for line in f:
            if line.startswith("VmHWM:"):
                return int(line.split()[1])
    return 0


def sparse_model(path, size):
    h = json.dumps({"big": {"dtype": "U8", "shape": [size],
                            "data_offsets": [0, size]}}).encode()
    h += b" " * (-len(h) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(h)) + h)
        f.truncate(8 + len(h) + size)


def one(url, mnt, size, cache, opts):
    p = T.mount_fg(url, mnt, "-o", ",".join(opts))
    try:
        before = hwm_kb(p.pid)
        t = time.monotonic()
        with open(os.path.join(mnt, "big"), "rb", buffering=0) as f:
            n = 0
            while True:
                b = f.read(MIB)
                if not b:
                    break
                n += len(b)
        dt = time.monotonic() - t
        assert n == size, (n, size)
        after = hwm_kb(p.pid)
    finally:
        T.stop_fg(p, mnt, timeout=60)
    return before, after, dt


def main():
    work = sys.argv[1]
    gib = int(sys.argv[2]) if len(sys.argv) > 2 else 4
    size = gib << 30
    os.makedirs(work, exist_ok=True)
    root = os.path.join(work, "www")
    os.makedirs(root, exist_ok=True)
    sparse_model(os.path.join(root, "m.safetensors"), size)
    mnt = os.path.join(work, "mnt")
    os.makedirs(mnt, exist_ok=True)
    ngx = Nginx(os.path.join(work, "ngx"), root)
    ngx.start()
    try:
        url = ngx.url("m.safetensors")
        rows = []
        for name, budget, opts in (
                ("cache", BUDGET_CACHE,
                 ["cache=" + os.path.join(work, "cache"),
                  "cache_size=%dG" % (gib + 1)]),
                ("nocache", BUDGET_NOCACHE, ["nocache"])):
            subprocess.run(["rm", "-rf", os.path.join(work, "cache")])
            before, after, dt = one(url, mnt, size, name, opts)
            rows.append((name, before, after, dt, budget))
    finally:
        ngx.stop()
        subprocess.run(["rm", "-rf", os.path.join(work, "cache"), root])
    print("%d GiB tensor, read once in order through a fresh mount" % gib)
    print("%-8s %12s %12s %12s %10s %8s" % ("mode", "HWM mounted", "HWM after",
                                            "added", "budget", "MB/s"))
    for name, before, after, dt, budget in rows:
        print("%-8s %9.1f MiB %9.1f MiB %9.1f MiB %6d MiB %8.0f" % (
            name, before / 1024, after / 1024, (after - before) / 1024,
            budget, size / dt / 1e6))
    ok = all((a - b) / 1024 <= budget for _, b, a, _, budget in rows)
    print("within the budget: %s" % ("yes" if ok else "NO"))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
