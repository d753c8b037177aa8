#!/usr/bin/env python3
"""test_loaders.py: the ways loaders read, through the kernel.

O_DIRECT opens of tensor files and of virtual files (the header, .npy and
.f32 views): aligned 16 MiB reads give the bytes a buffered read gives,
and so do misaligned ones (or the kernel's error, never other bytes);
mmap, shared and private, of every file equals the file's bytes, and a
private mapping's writes stay private.  Then the page cache: a model read
once through a mount grows the page cache (the source's pages plus the
mount's, counted with mincore) by at most 1.1 times the bytes read.
Needs Debian's python3-numpy.
"""
import ctypes
import errno
import json
import mmap
import os
import sys

TESTS_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path[:0] = [TESTS_DIR + "/fixtures", TESTS_DIR + "/servers"]
import stfstest as T  # noqa: E402

import numpy as np  # noqa: E402

MiB = 1 << 20
PAGE = os.sysconf("SC_PAGE_SIZE")

_libc = ctypes.CDLL(None, use_errno=True)
_libc.mmap.restype = ctypes.c_void_p
_libc.mmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int,
                       ctypes.c_int, ctypes.c_int, ctypes.c_long]
_libc.munmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t]
_libc.mincore.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_char_p]


def resident(path):
    """Bytes of path in the page cache (mincore of a shared map: no page
    is read in by asking)."""
    size = os.path.getsize(path)
    if size == 0:
        return 0
    fd = os.open(path, os.O_RDONLY)
    try:
        addr = _libc.mmap(None, size, mmap.PROT_READ, mmap.MAP_SHARED, fd, 0)
        assert addr not in (None, ctypes.c_void_p(-1).value), path
        n = (size + PAGE - 1) // PAGE
        vec = ctypes.create_string_buffer(n)
        rc = _libc.mincore(addr, size, vec)
        _libc.munmap(addr, size)
        assert rc == 0, "mincore %s: %d" % (path, ctypes.get_errno())
        return sum(b & 1 for b in vec.raw[:n]) * PAGE
    finally:
        os.close(fd)


def evict(path):
    fd = os.open(path, os.O_RDONLY)
    os.fsync(fd)
    os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
    os.close(fd)


def make_model(d, big=24 * MiB):
    """Tensors of awkward sizes (not whole pages), BF16 for the views."""
    rng = np.random.default_rng(34)
    tensors = []
    for i, n in enumerate([big + 13, 3 * MiB + 4095, 5, PAGE, 1]):
        tensors.append(("t%d" % i, "U8", [n],
                        rng.integers(0, 256, n, dtype=np.uint8).tobytes()))
    tensors.append(("bf", "BF16", [MiB + 3],
                    rng.integers(0, 1 << 16, MiB + 3,
                                 dtype=np.uint16).tobytes()))
    return T.write_st(os.path.join(d, "m.safetensors"), tensors)


def files_of(mnt):
    return sorted(os.path.join(mnt, n) for n in os.listdir(mnt))


def buffered(path):
    with open(path, "rb") as f:
        return f.read()


def source_bytes(src, name):
    with open(src, "rb") as f:
        n = int.from_bytes(f.read(8), "little")
        a, b = json.loads(f.read(n))[name]["data_offsets"]
        f.seek(8 + n + a)
        return f.read(b - a)


def direct_read(path, size, bs=16 * MiB):
    """The whole file by O_DIRECT reads of bs into an aligned buffer."""
    buf = mmap.mmap(-1, bs)
    out = bytearray()
    fd = os.open(path, os.O_RDONLY | os.O_DIRECT)
    try:
        off = 0
        while True:
            n = os.preadv(fd, [buf], off)
            if n == 0:
                break
            out += buf[:n]
            off += n
    finally:
        os.close(fd)
        buf.close()
    assert len(out) == size, (path, len(out), size)
    return bytes(out)


def test_o_direct(d, mnt):
    src = make_model(d)
    T.mount_fg(src, mnt, "-o", "npy,convert=f32")
    names = [n for n in os.listdir(mnt)]
    assert any(n.endswith(".npy") for n in names), names
    assert any(n.endswith(".f32") for n in names), names
    for p in files_of(mnt):
        want = buffered(p)
        name = os.path.basename(p)
        if name.startswith("t") and "." not in name:
            assert want == source_bytes(src, name), name
        assert direct_read(p, len(want)) == want, p
        fd = os.open(p, os.O_RDONLY | os.O_DIRECT)
        try:
            for off, n in ((1, 4095), (4097, 100000), (PAGE - 1, MiB + 7),
                           (3, 16 * MiB), (len(want) - 1, 9),
                           (len(want) + 5, 10)):
                try:
                    got = os.pread(fd, n, off)
                except OSError as e:
                    assert e.errno == errno.EINVAL, (p, off, n, e)
                    continue
                assert got == want[off:off + n], (p, off, n)
        finally:
            os.close(fd)


def test_mmap(d, mnt):
    src = make_model(d)
    T.mount_fg(src, mnt, "-o", "npy,convert=f32")
    for p in files_of(mnt):
        want = buffered(p)
        if not want:
            continue
        with open(p, "rb") as f:
            shared = mmap.mmap(f.fileno(), 0, flags=mmap.MAP_SHARED,
                               prot=mmap.PROT_READ)
            private = mmap.mmap(f.fileno(), 0, flags=mmap.MAP_PRIVATE,
                                prot=mmap.PROT_READ | mmap.PROT_WRITE)
        try:
            assert shared[:] == want, p
            assert private[:] == want, p
            # a private mapping's writes are its own
            private[0] = want[0] ^ 0xff
            assert private[0] != want[0]
            assert shared[0] == want[0], p
            assert buffered(p) == want, p
        finally:
            shared.close()
            private.close()


def test_page_cache_once(d, mnt):
    """Each byte read once is in the page cache once: the source's pages
    are dropped as they are served, the mount's own are kept (a re-read
    is served from them)."""
    src = make_model(d, big=96 * MiB)
    evict(src)
    T.mount_fg(src, mnt)
    tensors = [p for p in files_of(mnt) if os.path.basename(p)[0] in "tb"]
    before = resident(src)
    n = 0
    for p in tensors:
        with open(p, "rb") as f:
            while True:
                b = f.read(4 * MiB)
                if not b:
                    break
                n += len(b)
    grown = resident(src) - before + sum(resident(p) for p in tensors)
    assert grown <= 1.1 * n, "%d bytes read, page cache grew %d (%.2fx)" % (
        n, grown, grown / n)
    # still the same bytes, on a re-read from the mount's page cache and
    # from a fresh mount with the source's pages gone
    for p in tensors:
        name = os.path.basename(p)
        assert buffered(p) == source_bytes(src, name), name
    T.unmount(mnt)
    T.mount_fg(src, mnt)
    for p in tensors:
        name = os.path.basename(p)
        assert buffered(p) == source_bytes(src, name), name


def source_vmflags(pid, src):
    """The VmFlags of the daemon's mapping of src (its smaps)."""
    want = os.path.realpath(src)
    with open("/proc/%d/smaps" % pid) as f:
        cur = None
        for line in f:
            head = line.split()
            if head and "-" in head[0] and len(head) >= 6:
                cur = " ".join(head[5:])
            elif head and head[0] == "VmFlags:" and cur == want:
                return head[1:]
    raise AssertionError("no mapping of %s in the daemon" % want)


def test_source_huge_pages(d, mnt):
    """The daemon maps a local source for huge pages and reads in order
    (VmFlags hg, sr): the page cache reads it in 2 MiB folios, a few to
    insert, map and drop per request (8 readers at 8 places cost the
    daemon 0.65 s of CPU a GiB in 4 KiB pages, 0.2 s in 2 MiB folios);
    the bytes are the source's, in a mapping and in reads."""
    src = make_model(d, big=24 * MiB)
    evict(src)
    p = T.mount_fg(src, mnt)
    flags = source_vmflags(p.pid, src)
    assert "hg" in flags and "sr" in flags, flags
    for q in files_of(mnt):
        name = os.path.basename(q)
        if name[0] in "tb":
            assert buffered(q) == source_bytes(src, name), name


if __name__ == "__main__":
    sys.exit(T.run_tests([
        test_o_direct,
        test_mmap,
        test_page_cache_once,
        test_source_huge_pages,
    ]))
