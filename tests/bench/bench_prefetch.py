#!/usr/bin/env python3
"""bench_prefetch.py WORK [MIB] [ROUNDS]: `stfs prefetch` and the cold read
through a mount, side by side with curl in the same run
(docs/performance.md, "Prefetch").

A 4-shard model of MIB MiB (default 1024) with its index is made in WORK
and served on 127.0.0.1 by tests/servers/pacedhttp.py, every connection capped at
25 MB/s by the kernel (SO_MAX_PACING_RATE on each accepted socket), and by
nginx without a cap.  Each round, in turn:
  - 8 curls at once, each a range of a shard (2 per shard): the bytes of
    the model over 8 connections, the baseline;
  - `stfs prefetch` (--wait, -q) of a fresh mount with an empty cache
    (connections=8, the default);
  - a cold read: `cat` of every tensor file of a fresh mount, empty cache;
  - the read right after the warm, in the same mount (the warm's blocks
    still in the page cache), beside `cat` of a fresh local mount of the
    shards, in the page cache too;
  - the same read after the warm (a new mount of the warm cache), beside
    `cat` of the tensor files of a local mount of the shards, both read
    from the disk (the cache's files and the shards evicted from the
    page cache first: stfs drops the pages of its cache's blocks once
    served, so a later mount reads them from the disk);
  - uncapped (nginx): a cold read with the cache, with -o nocache, and
    8 curls writing the bytes to files beside the cache, then the same
    with each file flushed (fdatasync) as the cache flushes its blocks
    before naming them (the disk's share);
  - two ranks: two mounts with caches of their own, each warming half the
    shards by --include; the bytes nginx sent each counted from its log;
  - a program's read of 4 KiB in the middle of the last tensor: on an
    idle fresh mount, and 1 s into a warm of the whole mount (paced).
The server's files are read into the page cache before every fetch over
the network (curl's and stfs's alike), as an object store's are not our
disk's business.  Medians over the rounds; ratios are medians of
per-round ratios.
"""
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path[:0] = [HERE] + [os.path.join(os.path.dirname(HERE), d)
                         for d in ("fixtures", "servers")]
import stfstest as T  # noqa: E402
from fixtures import Nginx, free_port, wait_port  # noqa: E402

MiB = 1 << 20
RATE = 25 * 1000 * 1000
NAMES = ["model-%05d-of-00004.safetensors" % (i + 1) for i in range(4)]


class Paced:
    """tests/servers/pacedhttp.py serving root, each connection capped at
    rate."""

    def __init__(self, root, rate):
        self.port = free_port()
        self.proc = subprocess.Popen([
            sys.executable,
            os.path.join(os.path.dirname(HERE), "servers",
                         "pacedhttp.py"),
            root, str(self.port), str(rate)])
        T._procs.append(self.proc)
        assert wait_port(self.port), "pacedhttp.py did not start"

    def url(self, path=""):
        return "http://127.0.0.1:%d/%s" % (self.port, path)

    def stop(self):
        self.proc.kill()
        self.proc.wait()


def make_model(d, mib):
    """4 shards of 4 tensors each; the index.  Returns the tensor paths."""
    per = (mib * MiB) // 16
    wm, paths = {}, []
    block = os.urandom(MiB)
    for i, name in enumerate(NAMES):
        tensors = [("layers.%d.w%d" % (i, k), "U8", [per],
                    (block * (per // MiB + 1))[:per]) for k in range(4)]
        T.write_st(os.path.join(d, name), tensors)
        for t in tensors:
            wm[t[0]] = name
            paths.append(t[0].replace(".", "/"))
    with open(os.path.join(d, "model.safetensors.index.json"), "w") as f:
        json.dump({"metadata": {}, "weight_map": wm}, f)
    return paths


def curls(url, d, sizes, out=None):
    """8 curls at once, 2 per shard; out: a directory to write to."""
    procs = []
    for n in NAMES:
        half = sizes[n] // 2
        for k, (a, b) in enumerate(((0, half - 1), (half, sizes[n] - 1))):
            dst = os.path.join(out, "%s.%d" % (n, k)) if out else "/dev/null"
            procs.append(subprocess.Popen(
                ["curl", "-sf", "-r", "%d-%d" % (a, b), url + n, "-o", dst]))
    for p in procs:
        assert p.wait() == 0, "curl failed"


def mount(src, mnt, *opts):
    subprocess.run([T.STFS, "mount"] + [x for o in opts for x in ("-o", o)]
                   + [src, mnt], check=True)
    T._mounts.append(mnt)


def cat(mnt, paths):
    subprocess.run(["cat"] + [os.path.join(mnt, p) for p in paths],
                   stdout=subprocess.DEVNULL, check=True)


def timed(fn):
    t = time.perf_counter()
    fn()
    return time.perf_counter() - t


def fresh(cache):
    shutil.rmtree(cache, ignore_errors=True)


def files_under(d):
    for root, _, names in os.walk(d):
        for n in names:
            yield os.path.join(root, n)


def prime(d):
    """The files under d read into the page cache."""
    for p in files_under(d):
        with open(p, "rb") as f:
            while f.read(8 * MiB):
                pass


def evict(d):
    """The files under d out of the page cache (written back first)."""
    for p in files_under(d):
        fd = os.open(p, os.O_RDONLY)
        try:
            os.fdatasync(fd)
            os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
        finally:
            os.close(fd)


def synced(d):
    """Every file under d flushed to the disk."""
    for p in files_under(d):
        fd = os.open(p, os.O_RDONLY)
        try:
            os.fdatasync(fd)
        finally:
            os.close(fd)


def served(ngx, start):
    """Bytes of the range requests nginx logged from line start on."""
    with open(os.path.join(ngx.d, "access.log")) as f:
        lines = f.readlines()[start:]
    total = 0
    for line in lines:
        m = re.search(r"bytes=(\d+)-(\d+)", line)
        if m:
            total += int(m.group(2)) - int(m.group(1)) + 1
    return total, len(lines)


def log_lines(ngx):
    with open(os.path.join(ngx.d, "access.log")) as f:
        return len(f.readlines())


def first_read(mnt, path):
    """Seconds for 4 KiB in the middle of the tensor file path."""
    fd = os.open(os.path.join(mnt, path), os.O_RDONLY)
    try:
        mid = (os.fstat(fd).st_size // 2) & ~4095
        t = time.perf_counter()
        os.pread(fd, 4096, mid)
        return time.perf_counter() - t
    finally:
        os.close(fd)


def priority(src, mnt, cache, path, r):
    """A program's read of a block not fetched yet: on an idle mount,
    and during a warm of the whole mount (which reaches it last)."""
    fresh(cache)
    mount(src, mnt, "cache=" + cache)
    r["read_idle"].append(first_read(mnt, path))
    T.unmount(mnt)
    fresh(cache)
    mount(src, mnt, "cache=" + cache)
    subprocess.run([T.STFS, "prefetch", "-q", "--background", mnt],
                   check=True)
    time.sleep(1)
    r["read_warming"].append(first_read(mnt, path))
    T.unmount(mnt)


def one_round(w, paced, ngx, paths, sizes, mnt, r):
    cache, src = os.path.join(w, "cache"), paced.url(
        "model.safetensors.index.json")
    total = sum(sizes.values())
    srv = os.path.join(w, "srv")
    prime(srv)
    r["curl8"].append(timed(lambda: curls(paced.url(), w, sizes)))
    fresh(cache)
    mount(src, mnt, "cache=" + cache)
    prime(srv)
    r["prefetch"].append(timed(lambda: subprocess.run(
        [T.STFS, "prefetch", "-q", mnt], check=True)))
    # right after the warm, in the same mount: the warm's blocks are in
    # the page cache, beside a fresh local mount of the shards in it
    r["warm_mem"].append(timed(lambda: cat(mnt, paths)))
    T.unmount(mnt)
    mount(os.path.join(w, "srv", "model.safetensors.index.json"), mnt)
    prime(srv)
    r["local_mem"].append(timed(lambda: cat(mnt, paths)))
    T.unmount(mnt)
    mount(src, mnt, "cache=" + cache)           # after the warm
    evict(cache)
    r["warm_read"].append(timed(lambda: cat(mnt, paths)))
    T.unmount(mnt)
    mount(os.path.join(w, "srv", "model.safetensors.index.json"), mnt)
    evict(srv)
    r["local_read"].append(timed(lambda: cat(mnt, paths)))
    T.unmount(mnt)
    fresh(cache)
    mount(src, mnt, "cache=" + cache)
    prime(srv)
    r["cold_read"].append(timed(lambda: cat(mnt, paths)))
    T.unmount(mnt)
    # uncapped, on loopback
    usrc = ngx.url("model.safetensors.index.json")
    fresh(cache)
    mount(usrc, mnt, "cache=" + cache)
    prime(srv)
    r["u_cache"].append(timed(lambda: cat(mnt, paths)))
    T.unmount(mnt)
    mount(usrc, mnt, "nocache")
    prime(srv)
    r["u_nocache"].append(timed(lambda: cat(mnt, paths)))
    T.unmount(mnt)
    out = os.path.join(w, "curlout")
    fresh(out)
    os.mkdir(out)
    prime(srv)
    r["u_curl_file"].append(timed(lambda: curls(ngx.url(), w, sizes, out)))
    fresh(out)
    os.mkdir(out)
    prime(srv)
    r["u_curl_sync"].append(timed(lambda: (curls(ngx.url(), w, sizes, out),
                                           synced(out))))
    fresh(out)
    # two ranks, half the shards each
    for rank, glob in enumerate(("model-0000[12]-*", "model-0000[34]-*")):
        fresh(cache + str(rank))
        mount(usrc, mnt, "cache=" + cache + str(rank))
        start = log_lines(ngx)
        subprocess.run([T.STFS, "prefetch", "-q", "--include=" + glob, mnt],
                       check=True)
        got, _ = served(ngx, start)
        share = sum(sizes[n] for n in NAMES[2 * rank:2 * rank + 2])
        r["rank%d" % rank].append((got, share))
        T.unmount(mnt)
        fresh(cache + str(rank))
    priority(src, mnt, cache, paths[-1], r)
    fresh(cache)
    return total


def main():
    w = sys.argv[1]
    mib = int(sys.argv[2]) if len(sys.argv) > 2 else 1024
    rounds = int(sys.argv[3]) if len(sys.argv) > 3 else 3
    srv, mnt = os.path.join(w, "srv"), os.path.join(w, "mnt")
    os.makedirs(srv, exist_ok=True)
    os.makedirs(mnt, exist_ok=True)
    paths = make_model(srv, mib)
    sizes = {n: os.path.getsize(os.path.join(srv, n)) for n in NAMES}
    total = sum(sizes.values())
    paced = Paced(srv, RATE)
    ngx = Nginx(os.path.join(w, "ngx"), srv)
    keys = ["curl8", "prefetch", "cold_read", "warm_read", "local_read",
            "warm_mem", "local_mem",
            "u_cache", "u_nocache", "u_curl_file", "u_curl_sync",
            "rank0", "rank1",
            "read_idle", "read_warming"]
    r = {k: [] for k in keys}
    try:
        for i in range(rounds):
            one_round(w, paced, ngx, paths, sizes, mnt, r)
            print("round %d: %s" % (i + 1, {k: v[-1] for k, v in r.items()}),
                  flush=True)
    finally:
        T.unmount(mnt)
        paced.stop()
        ngx.stop()

    def med(k):
        return statistics.median(r[k])

    def ratio(num, den):          # median of per-round ratios (den/num time)
        return statistics.median(b / a for a, b in zip(r[num], r[den]))

    mb = total / 1e6
    print("model: %d MiB in 4 shards, %d rounds, paced at %d MB/s per "
          "connection" % (total // MiB, rounds, RATE // 1000000))
    rows = [
        ("stfs prefetch --wait (25 MB/s x 8)", "prefetch", "8 curls",
         "curl8"),
        ("cold read, cat (25 MB/s x 8)", "cold_read", "8 curls", "curl8"),
        ("read right after the warm, page cache", "warm_mem",
         "local mount, page cache", "local_mem"),
        ("read after the warm, from the disk", "warm_read",
         "local mount, from the disk", "local_read"),
        ("uncapped cold read, cache", "u_cache", "nocache", "u_nocache"),
        ("uncapped cold read, cache", "u_cache", "8 curls -o FILE",
         "u_curl_file"),
        ("uncapped cold read, cache", "u_cache",
         "8 curls -o FILE, fdatasync", "u_curl_sync"),
    ]
    for name, k, bname, bk in rows:
        print("| %s | %.0f MB/s | %s %.0f MB/s | %.2fx |" % (
            name, mb / med(k), bname, mb / med(bk), ratio(k, bk)))
    block_time = 4 * MiB / RATE
    print("| a program's 4 KiB read during a warm | %.0f ms | idle mount "
          "%.0f ms | +%.1f block-times (a 4 MiB block: %.0f ms) |" % (
              1000 * med("read_warming"), 1000 * med("read_idle"),
              (med("read_warming") - med("read_idle")) / block_time,
              1000 * block_time))
    for rank in (0, 1):
        got = [g for g, _ in r["rank%d" % rank]]
        share = r["rank%d" % rank][0][1]
        print("| rank %d: --include half the shards | %d bytes from the "
              "server | its share %d bytes | %.3fx |" % (
                  rank, statistics.median(got), share,
                  statistics.median(got) / share))


if __name__ == "__main__":
    main()
