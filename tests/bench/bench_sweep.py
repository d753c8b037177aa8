#!/usr/bin/env python3
"""bench_sweep.py WORK [--limit] [ROUNDS] STFS[,OPTS] ...: cold reads of
the benchmark's 1 GiB tensor over HTTP through each STFS binary (with
its -o OPTS), in turn with one `curl` of the same range, for choosing
defaults (docs/performance.md, "Remote defaults").

nginx serves the file on 127.0.0.1, or with --limit tests/servers/pacedhttp.py
with every connection capped at 100 MB/s.  Each round mounts every
variant with an empty cache and reads the tensor from start to end; the
first round is a warm-up.  Prints each variant's median MB/s and the
median of its per-round ratios to curl.  Variants can be options of one build
(`stfs,connections=4`) or builds that differ (another block size).
"""
import os
import shutil
import statistics
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path[:0] = [HERE] + [os.path.join(os.path.dirname(HERE), d)
                         for d in ("fixtures", "servers")]
import stfstest as T  # noqa: E402
import bench as B  # noqa: E402
from fixtures import Nginx  # noqa: E402
from bench_remote import Paced, curl, timed  # noqa: E402


def main():
    args = sys.argv[1:]
    work = args.pop(0)
    limit = "--limit" in args
    args = [a for a in args if a != "--limit"]
    rounds = int(args.pop(0)) if args and args[0].isdigit() else 3
    variants = args
    src, offs, _, _, _, _ = B.make_data(work)
    boff, bsize = offs["big"]
    root, name = os.path.dirname(src), os.path.basename(src)
    d = os.path.join(work, "sweep")
    shutil.rmtree(d, ignore_errors=True)
    os.makedirs(os.path.join(d, "mnt"))
    mnt, cache = os.path.join(d, "mnt"), os.path.join(d, "cache")
    ngx = Paced(root, 100 * 1000 * 1000) if limit else \
        Nginx(os.path.join(d, "ngx"), root)
    url = ngx.url(name)
    pin = B.Pin(src)
    R = {k: [] for k in ["curl"] + variants}
    try:
        for r in range(rounds + 1):
            v = {"curl": timed(lambda: curl(url, boff, boff + bsize - 1),
                               bsize)}
            for var in variants:
                exe, _, opts = var.partition(",")
                T.STFS = exe
                shutil.rmtree(cache, ignore_errors=True)
                # nocache goes without cache=
                o = [x for x in opts.split(",") if x]
                if "nocache" not in o:
                    o.insert(0, "cache=" + cache)
                with B.Mount(mnt, url, "-o", ",".join(o)) as m:
                    v[var] = B.read_range(os.path.join(m, "big"))
            print("round %d: %s" % (r, ", ".join(
                "%s %.0f MB/s" % (k, x / 1e6) for k, x in v.items())),
                flush=True)
            if r:
                for k, x in v.items():
                    R[k].append(x)
    finally:
        pin.release()
        ngx.stop()
    print("| variant (%s, median of %d) | MB/s | ratio to 1 curl |" % (
        "100 MB/s per connection" if limit else "no limit", rounds))
    print("|---|---|---|")
    for var in variants:
        print("| %s | %.0f | %.2fx |" % (
            var, statistics.median(R[var]) / 1e6,
            statistics.median(a / b for a, b in zip(R[var], R["curl"]))))
    return 0


if __name__ == "__main__":
    sys.exit(main())
