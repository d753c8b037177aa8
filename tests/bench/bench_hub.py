#!/usr/bin/env python3
"""bench_hub.py WORK [ROUNDS] [RATE] [BEFORE]: reading a 1 GiB model
through hf:// beside the same read through the plain CDN URL the Hub
redirects to, in one run (docs/performance.md, "The Hub at scale").

The Hub emulator (tests/servers/hubemu.py) redirects /resolve to nginx on
127.0.0.2, which checks a signed link on every request (secure_link,
links signed for an hour, as the Hub's CDN URLs are); RATE is nginx's
limit_rate per connection (e.g. 100m; none by default).  Each round, in
turn, with a fresh mount and an empty cache each time (4 MiB blocks,
8 connections), a sequential read of the model's one 1 GiB tensor:
  - through hf://org/big;
  - through the signed CDN URL itself (got from /resolve once), as a
    plain https:// source with a query;
  - with BEFORE (another stfs binary, e.g. an older build), through
    hf:// with that one.
It prints, for each, the median read rate (MB/s), the /resolve calls and
CDN requests per GiB read, and the ratio of the hf:// rate to the CDN
URL's (the median of the rounds' ratios).  Needs ~2 GiB free in WORK.
"""
import os
import statistics
import subprocess
import sys
import time
import urllib.request

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path[:0] = [HERE] + [os.path.join(os.path.dirname(HERE), d)
                         for d in ("fixtures", "servers")]
import stfstest as T  # noqa: E402
import hubemu  # noqa: E402
from fixtures import World, make_model, mount_logged, stop_logged  # noqa

MiB = 1 << 20
SIZE = 1 << 30


class NoRedirect(urllib.request.HTTPRedirectHandler):
    def redirect_request(self, *a, **k):
        return None


def signed_url(hub_url, rid):
    """The Location /resolve answers for rid's model.safetensors."""
    op = urllib.request.build_opener(NoRedirect)
    try:
        op.open("%s/%s/resolve/main/model.safetensors" % (hub_url, rid))
    except urllib.error.HTTPError as e:
        assert e.code == 302, e
        return e.headers["Location"]
    raise AssertionError("no redirect")


def cold_read(src, mnt, work, tag):
    """Seconds to read the tensor through a fresh mount of src with an
    empty cache."""
    cache = os.path.join(work, "cache-" + tag)
    p = mount_logged(src, mnt, os.path.join(work, tag + ".log"),
                     "-o", "connections=8,block_size=4M,cache=" + cache)
    try:
        t = time.time()
        n = 0
        with open(os.path.join(mnt, "w"), "rb", buffering=0) as f:
            while True:
                b = f.read(MiB)
                if not b:
                    break
                n += len(b)
        secs = time.time() - t
    finally:
        stop_logged(p, mnt)
        subprocess.run(["rm", "-rf", cache])
    assert n == SIZE, n
    return secs


def main():
    work = sys.argv[1]
    rounds = int(sys.argv[2]) if len(sys.argv) > 2 else 3
    rate = sys.argv[3] if len(sys.argv) > 3 and sys.argv[3] != "-" \
        else None
    before = sys.argv[4] if len(sys.argv) > 4 else None
    mnt, d = T.bench_dirs(work)
    res = {"hf": [], "cdn": [], "before": []}
    counts = {"hf": [], "cdn": [], "before": []}
    stfs = T.STFS
    with World(d, lifetime=3600, rate=rate) as w:
        w.hub.push(w.hub.repo("org/big"), {"model.safetensors": make_model(
            os.path.join(d, "model.safetensors"), SIZE)})
        url = signed_url(w.hub.url, "org/big")
        for r in range(rounds):
            for tag, src in (("hf", "hf://org/big"), ("cdn", url)) + (
                    (("before", "hf://org/big"),) if before else ()):
                T.STFS = before if tag == "before" else stfs
                r0 = w.hub.resolves()
                c0 = len(w.nginx_log().splitlines())
                secs = cold_read(src, mnt, work, tag)
                res[tag].append(secs)
                counts[tag].append((w.hub.resolves() - r0,
                                    len(w.nginx_log().splitlines()) - c0))
                print("round %d %-3s %6.1f MB/s  %4d resolves  %4d CDN "
                      "requests" % (r + 1, tag, SIZE / secs / 1e6,
                                    *counts[tag][-1]), flush=True)
    ratio = statistics.median(c / h for h, c in zip(res["hf"], res["cdn"]))
    print("\n| read of a 1 GiB tensor, cold (rate cap per connection: %s) "
          "| MB/s (median of %d) | /resolve calls per GiB | CDN requests "
          "per GiB |\n|---|---|---|---|" % (rate or "none", rounds))
    for tag, name in (("hf", "hf://org/big"), ("cdn", "the CDN URL"),
                      ("before", "hf://org/big, BEFORE")):
        if not res[tag]:
            continue
        print("| %s | %.0f | %d | %d |" % (
            name, SIZE / statistics.median(res[tag]) / 1e6,
            statistics.median(c[0] for c in counts[tag]),
            statistics.median(c[1] for c in counts[tag])))
    print("\nhf:// / CDN URL rate: %.2f" % ratio)
    subprocess.run(["rm", "-rf", d])


if __name__ == "__main__":
    T.require_fuse()
    try:
        main()
    finally:
        T._cleanup()
