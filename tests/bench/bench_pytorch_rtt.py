#!/usr/bin/env python3
"""bench_pytorch_rtt.py: how long opening a PyTorch checkpoint of many
large storages takes over a link with RTT round trips, beside another stfs
binary, in one run (docs/performance.md, "A remote .bin of many storages").

torch.save writes WORKDIR/ck.bin: N tensors (default 200) of 2 MiB each,
so no two storages' local headers lie within one 1 MiB read of each other
and each needs a read of its own.  nginx serves it behind the tests'
delaying proxy (tests/servers/delayproxy.py: RTT/2 each way, a round trip more
for a new connection).  Each round times `stfs inspect -q URL` (the whole
open path: the tail, the directory, the pickle, every local header) for
each binary, alternating, each with an empty cache, and counts the range requests nginx logged.
Prints the medians of ROUNDS in milliseconds and in round trips.

Usage: tests/bench/bench_pytorch_rtt.py WORKDIR [ROUNDS] [RTT_MS] [N]
       [BEFORE]   (BEFORE: another stfs binary, e.g. one built from main)
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
from delayproxy import DelayProxy  # noqa: E402
from fixtures import Nginx  # noqa: E402


def write_checkpoint(path, n):
    import torch
    g = torch.Generator().manual_seed(5)
    sd = {"model.layers.%d.weight" % i:
          torch.rand(512 * 1024, generator=g) for i in range(n)}
    torch.save(sd, path)


def requests(ngx):
    with open(os.path.join(ngx.d, "access.log")) as f:
        return sum(1 for line in f if "ck.bin" in line)


def main():
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    work = sys.argv[1]
    rounds = int(sys.argv[2]) if len(sys.argv) > 2 else 3
    rtt = (float(sys.argv[3]) if len(sys.argv) > 3 else 20.0) / 1000
    n = int(sys.argv[4]) if len(sys.argv) > 4 else 200
    bins = [("stfs", T.STFS)]
    if len(sys.argv) > 5:
        bins.append(("before", sys.argv[5]))
    srv = os.path.join(work, "srv")
    os.makedirs(srv, exist_ok=True)
    ck = os.path.join(srv, "ck.bin")
    if not os.path.exists(ck):
        write_checkpoint(ck, n)
    times = {b: [] for b, _ in bins}
    reqs = {}
    ngx = Nginx(os.path.join(work, "ngx"), srv)
    ngx.start()
    try:
        with DelayProxy(ngx.port, rtt) as p:
            url = p.url + "/ck.bin"
            for _ in range(rounds):
                for b, exe in bins:
                    before = requests(ngx)
                    cache = tempfile.mkdtemp(dir=work)  # empty each time
                    t = time.monotonic()
                    r = subprocess.run([exe, "inspect", "-q", url],
                                       capture_output=True, text=True,
                                       env=dict(os.environ,
                                                XDG_CACHE_HOME=cache))
                    times[b].append(time.monotonic() - t)
                    assert r.returncode == 0, r.stderr
                    reqs[b] = requests(ngx) - before
                    shutil.rmtree(cache)
    finally:
        ngx.stop()
    print("%d storages of 2 MiB, RTT %.0f ms, %d rounds (medians, min-max)"
          % (n, rtt * 1000, rounds))
    print("| binary | open (ms) | round trips | range requests |")
    print("|---|---|---|---|")
    for b, _ in bins:
        m = statistics.median(times[b])
        print("| %s | %.0f (%.0f-%.0f) | %.1f | %d |" % (
            b, m * 1000, min(times[b]) * 1000, max(times[b]) * 1000,
            m / rtt, reqs[b]))
    if len(bins) == 2:
        print("before / stfs: %.1fx" % (statistics.median(times["before"]) /
                                         statistics.median(times["stfs"])))


if __name__ == "__main__":
    main()
