#!/usr/bin/env python3
"""bench_repo_files.py: the daemon's peak resident memory (VmHWM) and the
mount's time for an hf:// repository of N files (default 100,000),
beside the same for one of 100 files, in one run (docs/performance.md,
"A repository of 10^5 files").

The Hub emulator (tests/servers/hubemu.py) lists the repository 1,000 entries a
page, as huggingface.co's tree API does (recursive=true), so N files are
N/1000 requests in turn; its files are written under WORKDIR (a tmpfs
such as /dev/shm is quicker).  Each repository is model.safetensors and
N - 1 JSON files of some 100 bytes in folders of 1,000
(data/FFF/NNNNN.json): the first 4,096 small files are fetched and
verified at mount (the cap, docs/remote.md), the rest stay lazy.  For
each, a fresh mount with an empty cache: VmHWM once mounted, and again
after `find %repo/ -type f` (every node looked up, as a loader walking
the tree would), and VmRSS then (what stays); the time to mount.  Prints both repositories, and what
each file of the large one added to the peak.  Peak memory does not
depend on the machine's load, so one round is enough.

Usage: tests/bench/bench_repo_files.py WORKDIR [N]
"""
import os
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path[:0] = [HERE] + [os.path.join(os.path.dirname(HERE), d)
                         for d in ("fixtures", "servers")]
import stfstest as T  # noqa: E402
from fixtures import World  # noqa: E402
from repofix import st_bytes, _arrays  # noqa: E402


def status_kb(pid, key="VmHWM"):
    with open("/proc/%d/status" % pid) as f:
        for line in f:
            if line.startswith(key + ":"):
                return int(line.split()[1])
    return 0


def files_of(n, weight):
    out = {"model.safetensors": weight}
    for i in range(n - 1):
        out["data/%03d/%05d.json" % (i // 1000, i)] = (
            b'{"i": %d, "pad": "%s"}\n' % (i, b"x" * (60 + i % 50)))
    return out


def one(rid, n, mnt, work):
    """(seconds to mount, VmHWM KiB mounted, VmHWM KiB after find,
    VmRSS KiB after find)."""
    cache = os.path.join(work, "cache-%d" % n)
    subprocess.run(["rm", "-rf", cache])
    log = open(os.path.join(work, "mount-%d.log" % n), "wb")
    t = time.time()
    p = subprocess.Popen([T.STFS, "mount", "-f", "-o", "cache=" + cache,
                          "hf://" + rid, mnt], stdout=log,
                         stderr=subprocess.STDOUT)
    log.close()
    T._procs.append(p)
    T._mounts.append(mnt)
    if not T.wait_mount(mnt, p, timeout=600):
        raise AssertionError("mount of %s failed (mount-%d.log)" % (rid, n))
    secs = time.time() - t
    mounted = status_kb(p.pid)
    r = subprocess.run(["find", os.path.join(mnt, "%repo"), "-type", "f"],
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    found = len(r.stdout.splitlines())
    assert found == n, (found, n)
    walked = status_kb(p.pid)
    rss = status_kb(p.pid, "VmRSS")
    T.unmount(mnt)
    assert p.wait(timeout=60) == 0
    subprocess.run(["rm", "-rf", cache])
    return secs, mounted, walked, rss


def main():
    work = os.path.abspath(sys.argv[1])
    n = int(sys.argv[2]) if len(sys.argv) > 2 else 100000
    mnt, d = T.bench_dirs(work)
    weight = st_bytes(_arrays(1, ["a.weight", "b.weight"]))
    res = {}
    with World(d) as w:
        w.hub.page = 1000
        for k in (100, n):
            w.hub.push(w.hub.repo("org/r%d" % k), files_of(k, weight))
        for k in (100, n):
            res[k] = one("org/r%d" % k, k, mnt, work)
            print("%d files: mounted in %.1f s, VmHWM %d KiB mounted, "
                  "%d KiB after find, VmRSS %d KiB" % ((k,) + res[k]),
                  flush=True)
    print("\n| hf:// repository | mount (s) | VmHWM mounted (MiB) | "
          "VmHWM after find %repo/ (MiB) | VmRSS then (MiB) |\n"
          "|---|---|---|---|---|")
    for k in (100, n):
        print("| %d files | %.1f | %.1f | %.1f | %.1f |" % (
            k, res[k][0], res[k][1] / 1024, res[k][2] / 1024,
            res[k][3] / 1024))
    per = (res[n][2] - res[100][2]) * 1024 / (n - 100)
    print("\neach file of %d added %.0f bytes to the peak (after find)"
          % (n, per))
    subprocess.run(["rm", "-rf", d])


if __name__ == "__main__":
    T.require_fuse()
    try:
        main()
    finally:
        T._cleanup()
