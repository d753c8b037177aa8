#!/usr/bin/env python3
"""bench_manifest_files.py [ROUNDS]: the time a mount takes to start with
a mirror whose manifest lists N files (docs/mirror.md), for N = 10,000
and 100,000 (the reader's limit), the listing from the manifest (a
pinned hf:// source, a complete manifest) with the Hub emulator and its
CDN stopped, so the manifest is all the mount reads besides the files.
The files past the model's are empty (nothing to fetch): what is timed
is the manifest's reading and the matching of its files.  Linear work
gives a ratio of about 10 between the two; the matching of each file by
a scan of the whole listing (before 2026-11-28) gave about 100: 122 s
for 100,000 files on a machine at load 13, 3.1 s since.  Medians over
the rounds (default 3) of the time from `stfs mount -f` to the mount in
place.
"""
import json
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
import s3server  # noqa: E402
from fixtures import stop_logged  # noqa: E402
from mirrorfix import Env, manifest, mirror, model  # noqa: E402


def mount_time(d, src, prefix, i):
    mnt = os.path.join(d, "mnt%d" % i)
    os.makedirs(mnt)
    log = open(os.path.join(d, "log%d" % i), "wb")
    t = time.monotonic()
    p = subprocess.Popen([T.STFS, "mount", "-f", "-o", "retries=0,cache=" +
                          os.path.join(d, "cache%d" % i) +
                          ",mirror=s3://models/" + prefix, src, mnt],
                         stdout=log, stderr=subprocess.STDOUT)
    log.close()
    T._procs.append(p)
    T._mounts.append(mnt)
    if not T.wait_mount(mnt, p, timeout=1800):
        raise SystemExit("the mount of %s did not start" % prefix)
    took = time.monotonic() - t
    stop_logged(p, mnt)
    return took


def main():
    rounds = int(sys.argv[1]) if len(sys.argv) > 1 else 3
    d = T.tmpdir()
    try:
        with Env(d) as e:
            sha, data = model(d, e.w)
            src = "hf://org/m@" + sha
            mirror(src, "s3://models/base")
            m0 = manifest(e.sw, "base")
            e.w.hub.stop()
            e.w.ngx.stop()
            times = {}
            for n in (10000, 100000):
                m = json.loads(json.dumps(m0))
                extra = next(f for f in m["files"]
                             if f["path"] == "README.md")
                for k in range(n - len(m["files"])):
                    m["files"].append(dict(extra, path="d%d/f%d.md" % (
                        k % 300, k), size=0, crc32c="", origin_sum=None))
                e.sw.put("models", "base/.stfs-mirror/manifest.json",
                         json.dumps(m).encode())
                times[n] = [mount_time(d, src, "base", n * 10 + r)
                            for r in range(rounds)]
                print("%6d files: mounted in %.2f s (median of %d: %s)" % (
                    n, statistics.median(times[n]), rounds,
                    ", ".join("%.2f" % t for t in times[n])), flush=True)
            print("ratio 100,000 / 10,000 files: %.1fx (linear: about 10)"
                  % (statistics.median(times[100000]) /
                     statistics.median(times[10000])))
    finally:
        s3server.stop_shared()
        for mnt in T._mounts:
            T.unmount(mnt)
        shutil.rmtree(d, ignore_errors=True)


if __name__ == "__main__":
    main()
