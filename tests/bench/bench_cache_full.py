#!/usr/bin/env python3
"""bench_cache_full.py [WORK] [ROUNDS] [BLOCKS]: writing through a full node
cache against an empty one (issue 52, "a full node cache costs nothing
per block").

A model of 256 MiB (64 blocks of 4 MiB) is served by nginx on 127.0.0.1.
Each round, in turn (A B A B):
  - empty: a fresh mount over an empty cache; cat of its 16 tensors, the
    unmount (which waits for the blocks to be written);
  - full: the same over a cache already holding BLOCKS (100,000 by
    default) block files of 4 MiB + 4 KiB, sparse (ftruncate: made fast,
    no disk used), in 100 objects, their mtimes older than the model's,
    with cache_size their sum: every block written must first make room.
Both caches are on /dev/shm (a tmpfs; CACHE_ROOT= to choose another
place): there, 100,000 sparse files are made in seconds, where ext4 took
0.4 ms each on the test machine, and what is measured is stfs's own
work per block, not the disk's.
The mount (which walks the cache once to count it) is not timed; the
read and the unmount are.  The fill is refreshed between rounds (the
files evicted made again, the model's blocks removed).  Prints the
medians, spreads and the ratio of the empty cache's time to the full
one's (1.0: a full cache costs nothing).
"""
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path[:0] = [HERE] + [os.path.join(os.path.dirname(HERE), d)
                         for d in ("fixtures", "servers")]
import stfstest as T  # noqa: E402
from fixtures import Nginx  # noqa: E402

MiB = 1 << 20
BLOCK = 4 * MiB + 4096          # a block file: its bytes and its header
OBJS = 100


def fill(cache, n):
    """n sparse block files under cache/v1 (made again where missing),
    their mtimes a day old: truncate(1) and touch(1) over each object's
    names, which is fast."""
    per = (n + OBJS - 1) // OBJS
    for k in range(OBJS):
        d = os.path.join(cache, "v1", "%016x" % (0xf111 + k),
                         "%016x" % (0xb10c + k))
        os.makedirs(d, mode=0o700, exist_ok=True)
        names = "\n".join(str(i) for i in range(min(per, n - k * per)))
        for cmd in (["truncate", "-s", str(BLOCK)],
                    ["touch", "-d", "1 day ago"]):
            subprocess.run(["xargs"] + cmd, input=names.encode(), cwd=d,
                           check=True, preexec_fn=lambda: os.umask(0o077))
    os.chmod(cache, 0o700)
    os.chmod(os.path.join(cache, "v1"), 0o700)


def model_dirs(cache):
    v1 = os.path.join(cache, "v1")
    return [os.path.join(v1, a) for a in os.listdir(v1)
            if not a.startswith("000000000000f")]


def cat(url, mnt, cache, size):
    p = T.mount_fg(url, mnt, "-o", "cache=%s,cache_size=%d" % (cache, size))
    t0 = time.monotonic()
    try:
        for i in range(16):
            with open(os.path.join(mnt, "w/%d" % i), "rb") as f:
                while f.read(1 << 20):
                    pass
    finally:
        T.stop_fg(p, mnt, timeout=600)
    return time.monotonic() - t0


def main():
    work = sys.argv[1] if len(sys.argv) > 1 else T.tmpdir()
    rounds = int(sys.argv[2]) if len(sys.argv) > 2 else 3
    nblocks = int(sys.argv[3]) if len(sys.argv) > 3 else 100000
    data = os.path.join(work, "data")
    os.makedirs(data, exist_ok=True)
    chunk = os.urandom(MiB)
    tensors = [("w.%d" % i, "U8", [16 * MiB], chunk * 16)
               for i in range(16)]
    T.write_st(os.path.join(data, "m.safetensors"), tensors)
    ngx = Nginx(os.path.join(work, "ngx"), data)
    url = ngx.url("m.safetensors")
    mnt = os.path.join(work, "mnt")
    os.makedirs(mnt, exist_ok=True)
    croot = tempfile.mkdtemp(prefix="stfs-bench-cache-",
                             dir=os.environ.get("CACHE_ROOT", "/dev/shm"))
    full, empty = os.path.join(croot, "full"), os.path.join(croot, "empty")
    t0 = time.monotonic()
    os.makedirs(full, mode=0o700, exist_ok=True)
    fill(full, nblocks)
    print("filled %d sparse blocks in %.1f s" % (nblocks,
                                                 time.monotonic() - t0))
    # full: the fill's files, their directories and the cache's own
    size = nblocks * BLOCK + OBJS * 2 * 4096 + 3 * 4096
    R = {"empty": [], "full": []}
    try:
        for r in range(rounds):
            for kind in ("empty", "full"):
                if kind == "empty":
                    shutil.rmtree(empty, ignore_errors=True)
                    cache = empty
                else:
                    for m in model_dirs(full):
                        shutil.rmtree(m)
                    fill(full, nblocks)
                    try:
                        os.unlink(os.path.join(full, "usage"))
                    except FileNotFoundError:
                        pass
                    cache = full
                R[kind].append(cat(url, mnt, cache, size))
                print("round %d %-5s %.2f s" % (r + 1, kind, R[kind][-1]),
                      flush=True)
    finally:
        ngx.stop()
        shutil.rmtree(work, ignore_errors=True)
        shutil.rmtree(croot, ignore_errors=True)
    med = {k: statistics.median(v) for k, v in R.items()}
    ratios = sorted(e / f for e, f in zip(R["empty"], R["full"]))
    print("load: %s" % open("/proc/loadavg").read().strip())
    print("256 MiB through an empty cache: median %.2f s (%.2f-%.2f)" %
          (med["empty"], min(R["empty"]), max(R["empty"])))
    print("through a full cache of %d blocks: median %.2f s (%.2f-%.2f)" %
          (nblocks, med["full"], min(R["full"]), max(R["full"])))
    print("ratio empty/full (1.0: a full cache costs nothing): median "
          "%.2f, per round %s" % (statistics.median(ratios),
                                  " ".join("%.2f" % x for x in ratios)))


if __name__ == "__main__":
    main()
