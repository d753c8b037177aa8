#!/usr/bin/env python3
"""bench.py: stfs side by side with direct reads and with squashfuse_ll.

Builds its own data in WORKDIR (about 4.5 GB of random bytes on disk, a
sparse 405B-shaped shard set, a 1,000,000-tensor header), then measures
ROUNDS rounds of each after one warm-up round, and reports medians.  A
measurement and its baselines run in turn within each round, so they see
the same moment of a noisy machine, and each ratio is the median of the
per-round ratios:

  first read    sequential read of a 1 GiB tensor from a fresh mount (the
                FUSE side cold, the source in the page cache) vs reading
                the same byte range of the source file directly
  re-read       the same tensor again on the same mount vs direct, and vs
                a direct re-read of a copy of those bytes whose page cache
                is made of 4 KiB folios, as a FUSE file's is on this
                kernel (the share of large folios of each is reported)
  cold read     after drop_caches, fresh mount vs a cold direct read
  random 4 KiB  / random 1 MiB preads over the 1 GiB tensor, fresh mount
  4 readers     4 threads on 4 different 256 MiB tensors vs 1 reader
  mmap          touch every page of a mapped tensor vs the mapped source
  squashfuse_ll the same bytes as a file in an uncompressed squashfs image
  convert=f32   reading the .f32 view of a 256 MiB BF16 tensor
  mounts        405B-shaped set and 1M-tensor file: mount time, daemon
                RSS, ls -R, and a walk reading every xattr of every tensor
                (what getfattr -R -d does)

Before each timed read, prime_memory touches and frees 3 GiB: this machine
kind's hypervisor takes back free guest memory, and the first touch of such
a page costs ~10 us, so without it the figures measure the hypervisor more
than the reader (a FUSE read fills fresh page-cache pages, a direct read of
a cached file does not).  First and cold reads are also measured unprimed,
each in turn with fresh_touch, which shows the state the memory was in.

Then first read, 4 readers and random 4 KiB reads with threads=1, 2, 4, and
first read with readahead 128 (the kernel's default), 1024 and 4096 KiB:
that is how the defaults were chosen.

Writes OUTDIR/results.md (the table), results.json and results.png.
Usage: bench.py WORKDIR OUTDIR [ROUNDS]   (scripts/bench.sh runs it)
"""
import ctypes
import json
import os
import random
import shutil
import statistics
import subprocess
import sys
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path[:0] = [HERE] + [os.path.join(os.path.dirname(HERE), d)
                         for d in ("fixtures", "servers")]
import stfstest as T  # noqa: E402

import numpy as np  # noqa: E402

THREADS = (1, 2, 4)
READAHEADS = (128, 1024, 4096)
GiB = 1 << 30
MiB = 1 << 20
BS = 1 * MiB


LIMIT = "/proc/sys/fs/fuse/max_pages_limit"


# ---- data -------------------------------------------------------------------

def make_data(work):
    src = os.path.join(work, "bench.safetensors")
    if not os.path.exists(src):
        print("bench: writing %s (3.5 GB of random bytes)" % src, flush=True)
        rng = np.random.default_rng(1)
        big = ("big", "U8", [GiB], GiB)
        parts = [big] + [("r%d" % i, "U8", [256 * MiB], 256 * MiB)
                         for i in range(4)]
        parts.append(("conv", "BF16", [128 * MiB], 256 * MiB))
        hdr, off = {}, 0
        for name, dt, shape, size in parts:
            hdr[name] = {"dtype": dt, "shape": shape,
                         "data_offsets": [off, off + size]}
            off += size
        h = json.dumps(hdr).encode()
        h += b" " * (-len(h) % 8)
        with open(src + ".tmp", "wb") as f:
            f.write(len(h).to_bytes(8, "little") + h)
            for name, dt, shape, size in parts:
                for k in range(0, size, 64 * MiB):
                    f.write(rng.integers(0, 256, 64 * MiB,
                                         dtype=np.uint8).tobytes())
        os.rename(src + ".tmp", src)
    n, _ = T.header_of(src)
    info = json.loads(T.header_of(src)[1])
    offs = {k: (8 + n + v["data_offsets"][0], v["data_offsets"][1] -
                v["data_offsets"][0]) for k, v in info.items()}
    # the peer: the 1 GiB tensor's bytes as a file in a squashfs image
    img = os.path.join(work, "big.squashfs")
    if not os.path.exists(img):
        d = os.path.join(work, "sq")
        os.makedirs(d, exist_ok=True)
        with open(src, "rb") as f, open(os.path.join(d, "big"), "wb") as o:
            f.seek(offs["big"][0])
            left = offs["big"][1]
            while left:
                b = f.read(min(left, 64 * MiB))
                o.write(b)
                left -= len(b)
        subprocess.run(["mksquashfs", d, img + ".tmp", "-noI", "-noD",
                        "-noF", "-noX", "-no-progress", "-quiet"],
                       check=True, stdout=subprocess.DEVNULL)
        os.rename(img + ".tmp", img)
        shutil.rmtree(d)
    shards = os.path.join(work, "405b")
    if not os.path.exists(os.path.join(shards,
                                       "model.safetensors.index.json")):
        os.makedirs(shards, exist_ok=True)
        T.make_405b(shards)
    # four 256 MiB shards of random bytes and their index
    sh4 = os.path.join(work, "shards4")
    if not os.path.exists(os.path.join(sh4, "model.safetensors.index.json")):
        os.makedirs(sh4, exist_ok=True)
        rng = np.random.default_rng(2)
        wm = {}
        for k in range(4):
            name = "model-%05d-of-00004.safetensors" % (k + 1)
            tensors = [("layers.%d.w%d" % (k, i), "U8", [64 * MiB],
                        rng.integers(0, 256, 64 * MiB,
                                     dtype=np.uint8).tobytes())
                       for i in range(4)]
            T.write_st(os.path.join(sh4, name), tensors)
            wm.update({t[0]: name for t in tensors})
        with open(os.path.join(sh4, "model.safetensors.index.json"),
                  "w") as f:
            json.dump({"metadata": {}, "weight_map": wm}, f)
    many = os.path.join(work, "many.safetensors")
    if not os.path.exists(many):
        T.make_many(many + ".tmp")
        os.rename(many + ".tmp", many)
    return src, offs, img, shards, many, sh4


# ---- primitives -------------------------------------------------------------

_libc = ctypes.CDLL(None, use_errno=True)
_libc.mmap.restype = ctypes.c_void_p
_libc.mmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int,
                       ctypes.c_int, ctypes.c_int, ctypes.c_long]
_libc.mlock.argtypes = [ctypes.c_void_p, ctypes.c_size_t]
_libc.munmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t]


class Pin:
    """Keep files in the page cache: this machine kind runs DAMON pageout,
    which evicts page cache left untouched for a while, so "the source is
    cached" does not hold by itself between rounds.  mlock of a read-only
    shared map pins the page cache pages themselves (no copy)."""

    def __init__(self, *paths):
        self.maps = []
        for p in paths:
            fd = os.open(p, os.O_RDONLY)
            size = os.fstat(fd).st_size
            addr = _libc.mmap(None, size, 1, 1, fd, 0)  # PROT_READ, SHARED
            os.close(fd)
            if addr in (None, ctypes.c_void_p(-1).value):
                raise OSError(ctypes.get_errno(), "mmap %s" % p)
            if _libc.mlock(addr, size) != 0:
                raise OSError(ctypes.get_errno(), "mlock %s" % p)
            self.maps.append((addr, size))

    def release(self):
        for addr, size in self.maps:
            _libc.munmap(addr, size)    # unlocks too
        self.maps = []


def drop_caches():
    os.sync()
    with open("/proc/sys/vm/drop_caches", "w") as f:
        f.write("3\n")


def fresh_touch(size=GiB):
    """Write one byte in every page of size bytes of fresh anonymous
    memory; returns bytes/s.  On this machine kind the hypervisor takes
    back free guest pages (virtio-balloon free page reporting), so the
    first touch of a page the kernel hands out can cost some 10 us: the
    FUSE side of a cold read fills as many fresh page-cache pages as the
    source side, and pays it twice where a direct read pays once."""
    a = np.empty(size, dtype=np.uint8)
    t = time.perf_counter()
    a[::4096] = 1
    dt = time.perf_counter() - t
    del a
    return size / dt


def small_pages(path):
    """Evict path from the page cache and read it back 4 KiB at a time
    with readahead off, so that its page cache is made of 4 KiB folios,
    as a FUSE file's is on a kernel that gives FUSE no large folios
    (6.18 here).  A re-read of it is the direct baseline with the folio
    size taken out (docs/performance.md, "Folio sizes")."""
    fd = os.open(path, os.O_RDONLY)
    try:
        os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
        os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_RANDOM)
        for off in range(0, os.fstat(fd).st_size, 4096):
            os.pread(fd, 4096, off)
    finally:
        os.close(fd)


def cache_sequentially(*paths):
    """Evict paths from the page cache and read each back from start to
    end, so that their cache is what a sequential reader leaves behind:
    readahead's large folios.  Otherwise the direct baseline depends on how
    a file last came into the cache: 12.5 and 23 GB/s in one run, with 15%
    and most of the source in large folios (before a pin; a pinned file's
    pages stay)."""
    for p in paths:
        fd = os.open(p, os.O_RDONLY)
        try:
            os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
            while os.read(fd, 8 * MiB):
                pass
        finally:
            os.close(fd)


def large_folio_share(path, off=0, size=64 * MiB):
    """Share of the cached pages of path in [off, off + size) that belong
    to folios larger than one page, from /proc/self/pagemap and
    /proc/kpageflags (root only): what the kernel's page cache is made
    of, which decides how fast a re-read copies out of it."""
    start = off // 4096 * 4096
    n = (off + size - start) // 4096
    fd = os.open(path, os.O_RDONLY)
    addr = _libc.mmap(None, n * 4096, 1, 1, fd, start)  # PROT_READ, SHARED
    os.close(fd)
    if addr in (None, ctypes.c_void_p(-1).value):
        raise OSError(ctypes.get_errno(), "mmap %s" % path)
    try:
        for i in range(n):
            ctypes.c_ubyte.from_address(addr + i * 4096).value
        pm = os.open("/proc/self/pagemap", os.O_RDONLY)
        kf = os.open("/proc/kpageflags", os.O_RDONLY)
        try:
            ents = np.frombuffer(os.pread(pm, 8 * n, addr // 4096 * 8),
                                 dtype="<u8")
            large = present = 0
            for e in ents.tolist():
                if not e >> 63:
                    continue                    # not present
                present += 1
                flags = int.from_bytes(os.pread(
                    kf, 8, (e & ((1 << 55) - 1)) * 8), "little")
                large += bool(flags & (3 << 15))  # COMPOUND_HEAD, _TAIL
        finally:
            os.close(pm)
            os.close(kf)
        return large / present if present else 0.0
    finally:
        _libc.munmap(addr, n * 4096)


PRIME = [True]   # prime_memory() before each timed read (see main)


def prime_memory(size=3 * GiB):
    """Touch and free size bytes (at most half of what is available), so
    the pages the next read allocates are backed by the hypervisor again;
    see fresh_touch.  Does nothing unless PRIME[0]."""
    if not PRIME[0]:
        return
    with open("/proc/meminfo") as f:
        avail = next(int(l.split()[1]) * 1024 for l in f
                     if l.startswith("MemAvailable:"))
    size = min(size, avail // 2) // 4096 * 4096
    a = np.empty(size, dtype=np.uint8)
    a[::4096] = 1
    del a


def read_range(path, off=0, size=None, prime=True):
    """Sequential read with 1 MiB buffers; returns bytes/s."""
    buf = bytearray(BS)
    mv = memoryview(buf)
    with open(path, "rb", buffering=0) as f:
        if size is None:
            size = os.fstat(f.fileno()).st_size
        f.seek(off)
        left = size
        if prime:
            prime_memory()
        t = time.perf_counter()
        while left:
            k = f.readinto(mv[:min(BS, left)])
            if not k:
                raise IOError("short read of %s" % path)
            left -= k
        return size / (time.perf_counter() - t)


def random_reads(path, off, size, bs, count, seed=5):
    """count preads of bs bytes at random bs-aligned offsets: ops/s."""
    rng = random.Random(seed)
    offs = [off + rng.randrange(size // bs) * bs for _ in range(count)]
    fd = os.open(path, os.O_RDONLY)
    try:
        prime_memory()
        t = time.perf_counter()
        for o in offs:
            if len(os.pread(fd, bs, o)) != bs:
                raise IOError("short pread")
        return count / (time.perf_counter() - t)
    finally:
        os.close(fd)


def parallel_read(jobs):
    """jobs: (path, off, size) read at once by one thread each: bytes/s."""
    errs = []

    def one(j):
        try:
            read_range(*j, prime=False)
        except Exception as e:
            errs.append(e)
    ts = [threading.Thread(target=one, args=(j,)) for j in jobs]
    prime_memory()
    t = time.perf_counter()
    for th in ts:
        th.start()
    for th in ts:
        th.join()
    el = time.perf_counter() - t
    if errs:
        raise errs[0]
    return sum(j[2] for j in jobs) / el


def touch_mmap(path, off, size):
    """Map and touch every page: bytes/s."""
    prime_memory()
    t = time.perf_counter()
    a = np.memmap(path, dtype=np.uint8, mode="r", offset=off, shape=(size,))
    int(a[::4096].sum())
    el = time.perf_counter() - t
    del a
    return size / el


class Mount:
    """A fresh stfs (or squashfuse_ll) mount, gone on exit."""

    def __init__(self, mnt, src, *opts, peer=False):
        self.mnt, self.src, self.opts, self.peer = mnt, src, opts, peer

    def __enter__(self):
        if self.peer:
            self.p = subprocess.Popen(["squashfuse_ll", "-f", self.src,
                                       self.mnt], stderr=subprocess.PIPE)
            T._procs.append(self.p)
            T._mounts.append(self.mnt)
            if not T.wait_mount(self.mnt, self.p):
                raise RuntimeError("squashfuse_ll did not mount")
        else:
            self.p = T.mount_fg(self.src, self.mnt, *self.opts)
        return self.mnt

    def __exit__(self, *a):
        if self.peer:
            T.unmount(self.mnt)
            self.p.wait(timeout=10)
        else:
            T.stop_fg(self.p, self.mnt)


def stats(vals):
    return {"median": statistics.median(vals), "min": min(vals),
            "max": max(vals), "rounds": len(vals), "values": vals}


def paired(R, rounds, fns):
    """Run the (key, fn) pairs in turn, round after round, so that a
    measurement and its baseline see the same moment of a noisy machine;
    ratios are then medians of per-round ratios.  A warm-up round comes
    first and is not counted."""
    vals = {k: [] for k, _ in fns}
    for _, fn in fns:       # one untimed round: the first of a group
        fn()                # runs slower on this machine kind
    for _ in range(rounds):
        for k, fn in fns:
            vals[k].append(fn())
    for k, _ in fns:
        R[k] = stats(vals[k])


# ---- the benchmark ----------------------------------------------------------

def main():
    work, out = sys.argv[1], sys.argv[2]
    rounds = int(sys.argv[3]) if len(sys.argv) > 3 else 5
    os.makedirs(work, exist_ok=True)
    os.makedirs(out, exist_ok=True)
    mnt = os.path.join(work, "mnt")
    os.makedirs(mnt, exist_ok=True)
    src, offs, img, shards, many, sh4 = make_data(work)
    boff, bsize = offs["big"]
    R = {}

    def fuse_first(*opts, key="big"):
        o, s = offs[key]

        def one():
            with Mount(mnt, src, *opts) as m:
                return read_range(os.path.join(m, key))
        return one

    print("bench: sequential reads", flush=True)
    cache_sequentially(src, img)
    pin = Pin(src, img)
    # the big tensor's bytes as a file of their own, re-read from a page
    # cache of 4 KiB folios (small_pages)
    small = os.path.join(work, "big-4k.bin")
    if not os.path.exists(small) or os.path.getsize(small) != bsize:
        with open(src, "rb") as f, open(small + ".tmp", "wb") as g:
            f.seek(boff)
            for _ in range(bsize // (64 * MiB)):
                g.write(f.read(64 * MiB))
        os.rename(small + ".tmp", small)

    def direct_4k():
        small_pages(small)
        return read_range(small)

    def reread():
        with Mount(mnt, src) as m:
            read_range(os.path.join(m, "big"))
            return read_range(os.path.join(m, "big"))

    def peer_first():
        with Mount(mnt, img, peer=True) as m:
            return read_range(os.path.join(m, "big"))

    def peer_reread():
        with Mount(mnt, img, peer=True) as m:
            read_range(os.path.join(m, "big"))
            return read_range(os.path.join(m, "big"))
    paired(R, rounds, [
        ("direct", lambda: read_range(src, boff, bsize)),
        ("first", fuse_first()), ("reread", reread),
        ("peer_first", peer_first), ("peer_reread", peer_reread),
        ("direct_4k", direct_4k)])
    with Mount(mnt, src) as m:
        read_range(os.path.join(m, "big"))
        R["folios"] = {"stfs": large_folio_share(os.path.join(m, "big")),
                       "direct": large_folio_share(src, boff)}
    small_pages(small)
    R["folios"]["direct_4k"] = large_folio_share(small)

    print("bench: cold reads", flush=True)
    pin.release()

    def cold_direct():
        drop_caches()
        return read_range(src, boff, bsize)

    def cold_fuse():
        with Mount(mnt, src) as m:
            drop_caches()
            return read_range(os.path.join(m, "big"))

    def cold_peer():
        with Mount(mnt, img, peer=True) as m:
            drop_caches()
            return read_range(os.path.join(m, "big"))
    paired(R, rounds, [("cold_direct", cold_direct), ("cold", cold_fuse),
                       ("cold_peer", cold_peer)])

    # The same without priming, as a user on this machine kind would see
    # it: how fast fresh pages are then decides most of the figure.
    print("bench: unprimed", flush=True)
    PRIME[0] = False
    paired(R, rounds, [("fresh_touch", fresh_touch),
                       ("cold_direct_raw", cold_direct),
                       ("cold_raw", cold_fuse)])
    cache_sequentially(src, img)
    pin = Pin(src, img)
    paired(R, rounds, [("fresh_touch_warm", fresh_touch),
                       ("direct_raw", lambda: read_range(src, boff, bsize)),
                       ("first_raw", fuse_first()),
                       ("reread_raw", reread),
                       ("peer_first_raw", peer_first),
                       ("peer_reread_raw", peer_reread),
                       ("direct_4k_raw", direct_4k)])
    R["folios"]["direct_raw"] = large_folio_share(src, boff)
    PRIME[0] = True

    # Larger read requests (-o max_request=), which need the kernel's
    # fs.fuse.max_pages_limit raised: put back as it was afterwards.
    print("bench: request sizes", flush=True)
    with open(LIMIT) as f:
        old_limit = f.read().strip()
    try:
        paired(R, rounds, [
            ("direct_mr", lambda: read_range(src, boff, bsize)),
            ("first_mr1024", fuse_first("-o", "max_request=1024")),
            ("first_mr4096", fuse_first("-o", "max_request=4096")),
            ("first_mr16384", fuse_first("-o", "max_request=16384"))])
    finally:
        with open(LIMIT, "w") as f:
            f.write(old_limit + "\n")

    print("bench: random reads", flush=True)

    def rand(path_fn, bs, count, peer=False, source=None, opts=()):
        def one():
            if path_fn is None:
                return random_reads(src, boff, bsize, bs, count)
            with Mount(mnt, source or src, *opts, peer=peer) as m:
                return random_reads(os.path.join(m, "big"), 0, bsize, bs,
                                    count)
        return one
    paired(R, rounds, [
        ("rand4k_direct", rand(None, 4096, 20000)),
        ("rand4k", rand(True, 4096, 20000)),
        ("rand4k_peer", rand(True, 4096, 20000, peer=True, source=img)),
        ("rand1m_direct", rand(None, MiB, 300)),
        ("rand1m", rand(True, MiB, 300)),
        ("rand1m_peer", rand(True, MiB, 300, peer=True, source=img))])

    print("bench: parallel readers, threads and readahead", flush=True)

    def readers(n, *opts):
        def one():
            with Mount(mnt, src, *opts) as m:
                return parallel_read([(os.path.join(m, "r%d" % i), 0,
                                       256 * MiB) for i in range(n)])
        return one
    paired(R, rounds, [
        ("one_reader", readers(1)), ("four_readers", readers(4)),
        ("four_direct", lambda: parallel_read(
            [(src, offs["r%d" % i][0], 256 * MiB) for i in range(4)]))])
    fns = []
    for th in THREADS:
        o = ("-o", "threads=%d" % th)
        fns += [("first_t%d" % th, fuse_first(*o)),
                ("four_t%d" % th, readers(4, *o)),
                ("rand4k_t%d" % th, rand(True, 4096, 20000, opts=o))]
    for ra in READAHEADS:
        fns.append(("first_ra%d" % ra,
                    fuse_first("-o", "readahead=%d" % ra)))
    paired(R, rounds, fns)

    print("bench: mmap and convert=f32", flush=True)

    def mm_fuse():
        with Mount(mnt, src) as m:
            return touch_mmap(os.path.join(m, "big"), 0, bsize)
    paired(R, rounds, [("mmap_direct", lambda: touch_mmap(src, boff, bsize)),
                       ("mmap", mm_fuse)])

    def conv(view):
        def one():
            with Mount(mnt, src, "-o", "convert=f32") as m:
                return read_range(os.path.join(m, "conv" + view))
        return one
    paired(R, rounds, [("conv_raw", conv("")), ("conv_f32", conv(".f32"))])

    print("bench: virtual files", flush=True)
    names = ["big", "r0", "r1", "r2", "r3", "conv"]

    def virtual_whole():
        with Mount(mnt, src) as m:
            return read_range(os.path.join(m, "%model.safetensors"))

    def tensors_in_turn():
        with Mount(mnt, src) as m:
            paths = [os.path.join(m, k) for k in names]
            total = sum(os.path.getsize(p) for p in paths)
            prime_memory()
            t = time.perf_counter()
            for p in paths:
                read_range(p, prime=False)
            return total / (time.perf_counter() - t)

    out_file = os.path.join(work, "copy.out")

    def timed_shell(cmd, nbytes):
        prime_memory()
        t = time.perf_counter()
        subprocess.run(cmd, shell=True, check=True)
        el = time.perf_counter() - t
        os.unlink(out_file)
        return nbytes / el

    shard_files = sorted(os.path.join(sh4, f) for f in os.listdir(sh4)
                         if f.endswith(".safetensors"))
    sh_bytes = sum(os.path.getsize(f) for f in shard_files)
    pin4 = Pin(*shard_files)

    def cp_virtual():
        with Mount(mnt, sh4) as m:
            return timed_shell("cp '%s/%%model.safetensors' '%s'" % (
                m, out_file), sh_bytes)

    def cat_shards():
        return timed_shell("cat %s > '%s'" % (" ".join(
            "'%s'" % f for f in shard_files), out_file), sh_bytes)
    paired(R, rounds, [("virtual_whole", virtual_whole),
                       ("tensors_in_turn", tensors_in_turn),
                       ("cp_virtual", cp_virtual),
                       ("cat_shards", cat_shards)])
    pin4.release()

    def virtual_stat(k):
        p = T.mount_fg(many, mnt)
        try:
            pid = p.pid
            before = T.rss_kb(pid)
            t = time.perf_counter()
            os.stat(os.path.join(mnt, "%model.safetensors"))
            st_ms = (time.perf_counter() - t) * 1000
            after_stat = T.rss_kb(pid)
            with open(os.path.join(mnt, "%model.safetensors"), "rb") as f:
                f.read(1 << 20)
                open_rss = T.rss_kb(pid)
            # another directory's file replaces the kept header
            os.stat(os.path.join(mnt, "model/layers/7/%model.safetensors"))
            closed = T.rss_kb(pid)
            return st_ms, before, after_stat, open_rss, closed
        finally:
            T.stop_fg(p, mnt)
    vs = [virtual_stat(k) for k in range(rounds)]
    R["virtual_stat_many"] = {
        "median": statistics.median(v[0] for v in vs),
        "rss_kb": [statistics.median(v[i] for v in vs) for i in
                   range(1, 5)], "rounds": rounds,
        "values": [v[0] for v in vs]}

    print("bench: mounts", flush=True)
    pin.release()

    def mount_stats(source, walk):
        t = time.perf_counter()
        r = subprocess.run([T.STFS, "mount", source, mnt],
                           capture_output=True)
        ms = (time.perf_counter() - t) * 1000
        if r.returncode:
            raise RuntimeError(r.stderr.decode())
        T._mounts.append(mnt)
        try:
            pids = T.daemons_for(mnt)
            rss = T.rss_kb(pids[0]) if pids else -1
            ls = getf = None
            if walk:
                t = time.perf_counter()
                subprocess.run("ls -R %s > /dev/null" % mnt, shell=True,
                               check=True)
                ls = (time.perf_counter() - t) * 1000
                # what getfattr -d does for each tensor: list, then get
                t = time.perf_counter()
                for root, _, files in os.walk(mnt):
                    for f in files:
                        if f != "%header.json":
                            fp = os.path.join(root, f)
                            for k in os.listxattr(fp):
                                os.getxattr(fp, k)
                getf = (time.perf_counter() - t) * 1000
        finally:
            T.unmount(mnt)
            T.wait_gone(mnt)
        return ms, rss, ls, getf

    for key, source in (("405b", shards), ("many", many)):
        runs = [mount_stats(source, i == 0) for i in range(rounds)]
        R["mount_" + key] = {
            "median": statistics.median(r[0] for r in runs),
            "rss_kb": statistics.median(r[1] for r in runs),
            "ls_ms": runs[0][2], "getfattr_ms": runs[0][3],
            "rounds": rounds}
    R["many_header"] = T.header_of(many)[0]
    R["405b_tensors"] = 1146

    with open(os.path.join(out, "results.json"), "w") as f:
        json.dump(R, f, indent=1)
    table, checks = report(R)
    with open(os.path.join(out, "results.md"), "w") as f:
        f.write(table)
    print(table)
    chart(R, checks, os.path.join(out, "results.png"))
    failed = [c for c in checks if not c[3]]
    print("%d targets met, %d missed" % (len(checks) - len(failed),
                                         len(failed)))
    return 0


def report(R):
    def gbs(k):
        return R[k]["median"] / 1e9

    def ratio(a, b):
        """median of per-round ratios (the pairs ran side by side)"""
        return statistics.median(x / y for x, y in zip(R[a]["values"],
                                                      R[b]["values"]))

    rows = [
        ("first read, 1 GiB (GB/s)", gbs("first"), "direct %.2f" %
         gbs("direct"), ratio("first", "direct")),
        ("first read vs squashfuse_ll", gbs("first"), "peer %.2f" %
         gbs("peer_first"), ratio("first", "peer_first")),
        ("re-read (GB/s)", gbs("reread"), "direct %.2f" % gbs("direct"),
         ratio("reread", "direct")),
        ("re-read vs squashfuse_ll", gbs("reread"), "peer %.2f" %
         gbs("peer_reread"), ratio("reread", "peer_reread")),
        ("re-read vs a direct re-read from 4 KiB folios", gbs("reread"),
         "direct, 4 KiB folios %.2f" % gbs("direct_4k"),
         ratio("reread", "direct_4k")),
        ("cold read (GB/s)", gbs("cold"), "cold direct %.2f" %
         gbs("cold_direct"), ratio("cold", "cold_direct")),
        ("cold read vs squashfuse_ll", gbs("cold"), "peer %.2f" %
         gbs("cold_peer"), ratio("cold", "cold_peer")),
        ("random 4 KiB (kIOPS)", R["rand4k"]["median"] / 1e3,
         "peer %.1f, direct %.1f" % (R["rand4k_peer"]["median"] / 1e3,
                                     R["rand4k_direct"]["median"] / 1e3),
         ratio("rand4k", "rand4k_peer")),
        ("random 1 MiB (IOPS)", R["rand1m"]["median"],
         "peer %.0f, direct %.0f" % (R["rand1m_peer"]["median"],
                                     R["rand1m_direct"]["median"]),
         ratio("rand1m", "rand1m_peer")),
        ("4 readers together (GB/s)", gbs("four_readers"), "1 reader %.2f"
         % gbs("one_reader"), ratio("four_readers", "one_reader")),
        ("mmap, touch every page (GB/s)", gbs("mmap"), "direct %.2f" %
         gbs("mmap_direct"), ratio("mmap", "mmap_direct")),
        ("convert=f32 view, output (GB/s)", gbs("conv_f32"), "raw %.2f" %
         gbs("conv_raw"), ratio("conv_f32", "conv_raw")),
        ("root virtual file, start to end (GB/s)", gbs("virtual_whole"),
         "its tensors in turn %.2f" % gbs("tensors_in_turn"),
         ratio("virtual_whole", "tensors_in_turn")),
        ("cp of a 4-shard model's virtual file (GB/s)", gbs("cp_virtual"),
         "cat of the shards %.2f" % gbs("cat_shards"),
         ratio("cp_virtual", "cat_shards")),
    ]
    targets = [
        ("first read >= 0.35x direct", ratio("first", "direct"), 0.35),
        ("first read >= 2.5x squashfuse_ll", ratio("first", "peer_first"),
         2.5),
        ("re-read >= 0.60x direct", ratio("reread", "direct"), 0.60),
        ("re-read >= 1.0x squashfuse_ll", ratio("reread", "peer_reread"),
         1.0),
        ("unprimed first read >= 0.35x direct",
         ratio("first_raw", "direct_raw"), 0.35),
        ("unprimed first read >= 2.5x squashfuse_ll",
         ratio("first_raw", "peer_first_raw"), 2.5),
        ("unprimed re-read >= 0.60x direct",
         ratio("reread_raw", "direct_raw"), 0.60),
        ("unprimed re-read >= 1.0x squashfuse_ll",
         ratio("reread_raw", "peer_reread_raw"), 1.0),
        ("cold read >= 0.6x direct cold", ratio("cold", "cold_direct"), 0.6),
        ("random 4 KiB >= squashfuse_ll", ratio("rand4k", "rand4k_peer"),
         1.0),
        ("4 readers >= 1 reader", ratio("four_readers", "one_reader"), 1.0),
    ]
    checks = [(n, v, t, v >= t) for n, v, t in targets]
    m405, mm = R["mount_405b"], R["mount_many"]
    checks.append(("405B-shaped mount <= 100 ms", m405["median"], 100,
                   m405["median"] <= 100))
    checks.append(("1M-tensor mount <= 2 s", mm["median"] / 1000, 2.0,
                   mm["median"] <= 2000))
    rss_x = mm["rss_kb"] * 1024 / R["many_header"]
    checks.append(("1M-tensor RSS <= 4x header", rss_x, 4.0, rss_x <= 4.0))
    for name, a, b, t in (
            ("virtual file >= 0.9x its tensors in turn", "virtual_whole",
             "tensors_in_turn", 0.9),
            ("cp virtual >= 0.9x cat of the shards", "cp_virtual",
             "cat_shards", 0.9)):
        checks.append((name, ratio(a, b), t, ratio(a, b) >= t))
    vst = R["virtual_stat_many"]
    checks.append(("first stat of the 1M-tensor virtual file <= 2 s",
                   vst["median"] / 1000, 2.0, vst["median"] <= 2000))

    out = ["| measurement (primed; median of %d; ratio: median of per-round "
           "ratios) | stfs | baseline | ratio |" %
           R["first"]["rounds"], "|---|---|---|---|"]
    for name, v, base, r in rows:
        out.append("| %s | %.2f | %s | %.2fx |" % (name, v, base, r))
    out.append("")
    out.append("Unprimed (no prime_memory before each read), in turn with "
               "a first touch of 1 GiB of fresh memory:")
    out.append("")
    out.append("| measurement | stfs | baseline | ratio | fresh memory GB/s |")
    out.append("|---|---|---|---|---|")
    out.append("| first read | %.2f | direct %.2f | %.2fx | %.2f [%.2f-%.2f] |"
               % (gbs("first_raw"), gbs("direct_raw"),
                  ratio("first_raw", "direct_raw"), gbs("fresh_touch_warm"),
                  R["fresh_touch_warm"]["min"] / 1e9,
                  R["fresh_touch_warm"]["max"] / 1e9))
    out.append("| first read vs squashfuse_ll | %.2f | peer %.2f | %.2fx | |"
               % (gbs("first_raw"), gbs("peer_first_raw"),
                  ratio("first_raw", "peer_first_raw")))
    out.append("| re-read | %.2f | direct %.2f | %.2fx | |"
               % (gbs("reread_raw"), gbs("direct_raw"),
                  ratio("reread_raw", "direct_raw")))
    out.append("| re-read vs squashfuse_ll | %.2f | peer %.2f | %.2fx | |"
               % (gbs("reread_raw"), gbs("peer_reread_raw"),
                  ratio("reread_raw", "peer_reread_raw")))
    out.append("| re-read vs a direct re-read from 4 KiB folios | %.2f | "
               "direct, 4 KiB folios %.2f | %.2fx | |"
               % (gbs("reread_raw"), gbs("direct_4k_raw"),
                  ratio("reread_raw", "direct_4k_raw")))
    out.append("| cold read | %.2f | cold direct %.2f | %.2fx | %.2f "
               "[%.2f-%.2f] |" % (gbs("cold_raw"), gbs("cold_direct_raw"),
                                  ratio("cold_raw", "cold_direct_raw"),
                                  gbs("fresh_touch"),
                                  R["fresh_touch"]["min"] / 1e9,
                                  R["fresh_touch"]["max"] / 1e9))
    out.append("")
    fo = R["folios"]
    out.append("Page cache in folios larger than 4 KiB (64 MiB sampled after "
               "a read): the stfs tensor %.0f%%, the source's range %.0f%% "
               "(%.0f%% in the unprimed runs), the 4 KiB-folio copy %.0f%%."
               % (100 * fo["stfs"], 100 * fo["direct"],
                  100 * fo["direct_raw"], 100 * fo["direct_4k"]))
    out.append("")
    out.append("| option | first read GB/s | 4 readers GB/s | random 4 KiB kIOPS |")
    out.append("|---|---|---|---|")
    for th in THREADS:
        out.append("| threads=%d | %.2f | %.2f | %.1f |" % (
            th, gbs("first_t%d" % th), gbs("four_t%d" % th),
            R["rand4k_t%d" % th]["median"] / 1e3))
    for ra in READAHEADS:
        out.append("| readahead=%d | %.2f | | |" % (ra, gbs("first_ra%d" %
                                                         ra)))
    out.append("")
    out.append("Read request size (`max_request=`, fs.fuse.max_pages_limit "
               "raised for the run), first read of 1 GiB, beside direct "
               "%.2f GB/s:" % gbs("direct_mr"))
    out.append("")
    out.append("| max_request | first read GB/s | vs direct | vs 1024 |")
    out.append("|---|---|---|---|")
    for mr in (1024, 4096, 16384):
        k = "first_mr%d" % mr
        out.append("| %d | %.2f | %.2fx | %.2fx |" % (
            mr, gbs(k), ratio(k, "direct_mr"), ratio(k, "first_mr1024")))
    out.append("")
    out.append("| mount | time (ms) | daemon RSS | ls -R | every xattr of every tensor |")
    out.append("|---|---|---|---|---|")
    out.append("| 405B-shaped: 191 shards, 1,146 tensors, 810 GB sparse | "
               "%.0f | %.1f MiB | %.0f ms | %.0f ms |" % (
                   m405["median"], m405["rss_kb"] / 1024, m405["ls_ms"],
                   m405["getfattr_ms"]))
    out.append("| 1,000,000 tensors, %.1f MB header | %.0f | %.0f MiB "
               "(%.1fx header) | %.0f ms | %.0f ms |" % (
                   R["many_header"] / 1e6, mm["median"],
                   mm["rss_kb"] / 1024, rss_x, mm["ls_ms"],
                   mm["getfattr_ms"]))
    out.append("")
    r = vst["rss_kb"]
    out.append("The root virtual file of the 1,000,000-tensor file: first "
               "stat %.0f ms (median of %d); daemon RSS %.0f MiB after the "
               "mount, %.0f after the stat, %.0f with the file open, %.0f "
               "once closed and another directory's file looked up." % (
                   vst["median"], vst["rounds"], r[0] / 1024, r[1] / 1024,
                   r[2] / 1024, r[3] / 1024))
    out.append("")
    out.append("| target | measured | met |")
    out.append("|---|---|---|")
    for name, v, t, ok in checks:
        out.append("| %s | %.2f | %s |" % (name, v, "yes" if ok else "NO"))
    return "\n".join(out) + "\n", checks


def chart(R, checks, path):
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("bench: no matplotlib, no chart")
        return
    keys = [("direct", "direct (warm)"), ("first", "stfs first read"),
            ("reread", "stfs re-read"), ("peer_first", "squashfuse_ll first"),
            ("peer_reread", "squashfuse_ll re-read"),
            ("cold_direct", "direct cold"), ("cold", "stfs cold"),
            ("cold_peer", "squashfuse_ll cold"),
            ("mmap_direct", "mmap direct"), ("mmap", "stfs mmap"),
            ("four_readers", "stfs 4 readers"),
            ("conv_f32", "stfs .f32 view")]
    fig, ax = plt.subplots(figsize=(9, 5.5))
    names = [k[1] for k in keys][::-1]
    vals = [R[k[0]]["median"] / 1e9 for k in keys][::-1]
    colors = ["#4c72b0" if "stfs" in n else "#999999" for n in names]
    ax.barh(names, vals, color=colors)
    for i, v in enumerate(vals):
        ax.text(v, i, " %.2f" % v, va="center", fontsize=8)
    ax.set_xlabel("GB/s, median of %d rounds (1 GiB tensor)" %
                  R["first"]["rounds"])
    ax.set_title("stfs read throughput vs direct and squashfuse_ll")
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    print("bench: chart in %s" % path)


if __name__ == "__main__":
    try:
        sys.exit(main())
    finally:
        T._cleanup()
