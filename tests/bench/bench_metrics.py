#!/usr/bin/env python3
"""bench_metrics.py: what counting costs (docs/metrics.md): a cold and a
warm read of one tensor from a URL with -o nometrics (nothing counted) and
with -o metrics=PATH (every counter, the FUSE requests timed, the file
written every 10 s), alternated A B B A A B ... so both see the same
moments of a busy machine and neither always runs after the other.

    STFS=build/src/cli/stfs python3 tests/bench/bench_metrics.py WORK \\
        [ROUNDS] [MIB]

Writes a sparse safetensors file of one U8 tensor of MIB MiB (default
512), serves it with nginx on loopback, and each round, for A then B:
a cold read (a fresh mount, an empty cache: every block fetched from
nginx and written to the cache), then a warm read (a fresh mount of that
cache: every block read from it), each the whole tensor in order with
1 MiB reads, timed from open to the last byte, and the daemon's CPU
time (user and system, from /proc/PID/stat before unmount).  Prints each
variant's median MB/s with its spread (min-max), the ratio of the medians
(B/A throughput: under 1 is a cost), the median of the per-round ratios,
and the daemon's CPU time summed over the rounds (B/A: over 1 is a
cost), which a busy machine disturbs less than wall time.
"""
import json
import os
import re
import shutil
import signal
import statistics
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


def sparse_model(path, size):
    h = json.dumps({"big": {"dtype": "U8", "shape": [size],
                            "data_offsets": [0, size]}}).encode()
    h += b" " * (-len(h) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(h)) + h)
        f.truncate(8 + len(h) + size)


def cpu_s(pid):
    """The process's user and system CPU time so far (its threads', the
    ended ones' too), in seconds."""
    with open("/proc/%d/stat" % pid) as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def timed_read(url, mnt, opts, size):
    """(MB/s, the daemon's CPU seconds) of a whole read through a fresh
    mount."""
    p = T.mount_fg(url, mnt, "-o", ",".join(opts))
    try:
        t = time.monotonic()
        n = 0
        with open(os.path.join(mnt, "big"), "rb", buffering=0) as f:
            while True:
                b = f.read(MIB)
                if not b:
                    break
                n += len(b)
        el = time.monotonic() - t
        cpu = cpu_s(p.pid)
    finally:
        T.stop_fg(p, mnt, timeout=60)
    assert n == size, (n, size)
    return size / el / 1e6, cpu


# the code that counts (src/lib/source/metrics.[ch], http/counted.c,
# src/fuse/fsmetrics.c): its functions, and the inline hooks' callers
# count only as much as their own samples
METRIC_SYMS = re.compile(r"stfs_m_|stfs_metrics_|stfs_fsmetrics_|"
                         r"stfs_httpc_counted|hist_add")


def perf_share(url, mnt, opts, size, reads=4):
    """With perf(1): the share of the daemon's CPU samples (user and
    kernel) in the counting code during `reads` warm reads, and the
    samples in all; None without perf."""
    perf = shutil.which("perf")
    if not perf:
        return None
    data = os.path.join(os.path.dirname(mnt), "perf.data")
    p = T.mount_fg(url, mnt, "-o", ",".join(opts))
    try:
        rec = subprocess.Popen([perf, "record", "-F", "4999", "-o", data,
                                "-p", str(p.pid)], stdout=subprocess.DEVNULL,
                               stderr=subprocess.DEVNULL)
        time.sleep(1)
        for _ in range(reads):
            with open(os.path.join(mnt, "big"), "rb", buffering=0) as f:
                while f.read(MIB):
                    pass
        rec.send_signal(signal.SIGINT)
        rec.wait(timeout=60)
    finally:
        T.stop_fg(p, mnt, timeout=60)
    out = subprocess.run([perf, "report", "-i", data, "--stdio", "--sort",
                          "sym", "-F", "sample,sym"], capture_output=True,
                         text=True).stdout
    total = mine = 0
    for line in out.splitlines():
        m = re.match(r"\s*(\d+)\s+\[.\]\s+(\S+)", line)
        if m:
            total += int(m.group(1))
            if METRIC_SYMS.search(m.group(2)):
                mine += int(m.group(1))
    return mine, total


def main():
    if len(sys.argv) < 2:
        print(__doc__)
        return 2
    work = os.path.abspath(sys.argv[1])
    rounds = int(sys.argv[2]) if len(sys.argv) > 2 else 5
    size = (int(sys.argv[3]) if len(sys.argv) > 3 else 512) * MIB
    os.makedirs(work, exist_ok=True)
    data, mnt = os.path.join(work, "data"), os.path.join(work, "mnt")
    os.makedirs(data, exist_ok=True)
    os.makedirs(mnt, exist_ok=True)
    sparse_model(os.path.join(data, "big.safetensors"), size)
    ngx = Nginx(os.path.join(work, "ngx"), data)
    url = ngx.url("big.safetensors")
    variants = (("A nometrics", ["nometrics"]),
                ("B metrics=", ["metrics=" + os.path.join(work, "m.prom")]))
    res = {(v, k): [] for v, _ in variants for k in ("cold", "warm")}
    try:
        for r in range(rounds + 1):             # round 0: warm-up
            # A B, then B A: neither always follows the other (the
            # previous run's cache writes still going to the disk)
            for name, opts in (variants if r % 2 else variants[::-1]):
                cache = os.path.join(work, "cache")
                shutil.rmtree(cache, ignore_errors=True)
                o = opts + ["cache=" + cache]
                cold = timed_read(url, mnt, o, size)
                warm = timed_read(url, mnt, o, size)
                if r:
                    res[(name, "cold")].append(cold)
                    res[(name, "warm")].append(warm)
                print("round %d %-12s cold %7.0f MB/s %5.2f s CPU  warm "
                      "%7.0f MB/s %5.2f s CPU" % ((r, name) + cold + warm),
                      flush=True)
    finally:
        ngx.stop()
        shutil.rmtree(os.path.join(work, "cache"), ignore_errors=True)
    print("\n%d MiB, %d rounds (medians; min-max)" % (size // MIB, rounds))
    for k in ("cold", "warm"):
        a = [x[0] for x in res[(variants[0][0], k)]]
        b = [x[0] for x in res[(variants[1][0], k)]]
        ca = sum(x[1] for x in res[(variants[0][0], k)])
        cb = sum(x[1] for x in res[(variants[1][0], k)])
        per = [y / x for x, y in zip(a, b)]
        print("%s: A %.0f MB/s (%.0f-%.0f)  B %.0f MB/s (%.0f-%.0f)  "
              "B/A of medians %.3f; per-round B/A median %.3f (%.3f-%.3f)"
              % (k, statistics.median(a), min(a), max(a),
                 statistics.median(b), min(b), max(b),
                 statistics.median(b) / statistics.median(a),
                 statistics.median(per), min(per), max(per)))
        print("%s: the daemon's CPU, all rounds: A %.2f s  B %.2f s  B/A "
              "%.3f" % (k, ca, cb, cb / ca if ca else float("nan")))
    ngx.start()
    try:
        cache = os.path.join(work, "cache")
        timed_read(url, mnt, ["nometrics", "cache=" + cache], size)
        share = perf_share(url, mnt, variants[1][1] + ["cache=" + cache],
                           size)
    finally:
        ngx.stop()
        shutil.rmtree(os.path.join(work, "cache"), ignore_errors=True)
    if share:
        print("warm, perf: %d of the daemon's %d CPU samples (%.2f%%) in the "
              "counting code" % (share[0], share[1],
                                 100.0 * share[0] / max(share[1], 1)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
