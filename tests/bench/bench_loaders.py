#!/usr/bin/env python3
"""bench_loaders.py: the read patterns of real loaders, on the source file,
stfs mounts and squashfuse_ll, side by side.

Patterns, each on the same model bytes:
  safe_open   map the safetensors file privately and touch every page of
              each tensor in header order (safetensors' safe_open, torch)
  prefetch    16 MiB preads of the whole file from 8 threads (vLLM)
  direct      O_DIRECT 16 MiB preads, 8 in flight (fastsafetensors,
              llama.cpp's direct I/O)
  torch.load  torch.load of a .bin; on an stfs mount of that .bin (local,
              or by URL for the remote places), which shows its tensors
              as files, each tensor file read into a torch tensor (what
              a loader does with a mount)
  cat         cat of every tensor file (the plain files: cat of the file)
Places:
  file        the source files on the local disk (the baseline)
  stfs        a local stfs mount (of the .safetensors; of the .bin)
  remote-cold an stfs mount of http://127.0.0.1 (tests/servers/pacedhttp.py, 1 GB/s
              a connection) with an empty disk cache
  remote-warm the same with the disk cache filled
  squashfuse  squashfuse_ll on an uncompressed squashfs image of the files
Each measurement is cold (drop_caches, a fresh mount) then warm (the same
pattern again on the same mount: the page cache holds the bytes).  Each
round runs every place in turn (the order reversed every other round), so
the places see the same moment of a busy machine; a ratio is the median
of the per-round ratios to the file, a rate the median rate; the spread
is min-max of the ratios.  Needs root (drop_caches), python3-torch,
squashfuse and squashfs-tools.

Usage: bench_loaders.py WORKDIR [SIZE_MIB [ROUNDS]]   (default 1024, 3)
"""
import json
import mmap
import os
import shutil
import socket
import statistics
import struct
import subprocess
import sys
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path[:0] = [HERE] + [os.path.join(os.path.dirname(HERE), d)
                         for d in ("fixtures", "servers")]
import stfstest as T  # noqa: E402

import numpy as np  # noqa: E402
import torch  # noqa: E402

MiB = 1 << 20
CHUNK = 16 * MiB
THREADS = 8
PATTERNS = ("safe_open", "prefetch", "direct", "torch.load", "cat")
PLACES = ("file", "stfs", "remote-cold", "remote-warm", "squashfuse")


# ---- data ---------------------------------------------------------------

def make_data(work, size):
    st = os.path.join(work, "data", "model.safetensors")
    binp = os.path.join(work, "data", "model.bin")
    os.makedirs(os.path.dirname(st), exist_ok=True)
    n = 16
    per = size // n
    if not os.path.exists(binp):
        rng = np.random.default_rng(34)
        sd = {"layer%02d" % i: torch.from_numpy(
            rng.integers(-30000, 30000, per // 2, dtype=np.int16))
            .view(torch.float16) for i in range(n)}
        T.write_st(st, [(k, "F16", [per // 2], v.numpy().tobytes())
                        for k, v in sd.items()])
        torch.save(sd, binp)
    img = os.path.join(work, "model.sqfs")
    if not os.path.exists(img):
        subprocess.run(["mksquashfs", os.path.dirname(st), img, "-noI",
                        "-noD", "-noF", "-noX", "-no-progress", "-quiet"],
                       check=True)
    return st, binp, img


def tensor_ranges(st):
    with open(st, "rb") as f:
        n = struct.unpack("<Q", f.read(8))[0]
        hdr = json.loads(f.read(n))
    hdr.pop("__metadata__", None)
    rs = sorted(((8 + n + v["data_offsets"][0],
                  v["data_offsets"][1] - v["data_offsets"][0], k)
                 for k, v in hdr.items()))
    return rs


# ---- patterns -------------------------------------------------------------

def p_safe_open(place):
    st = place["st"]
    with open(st, "rb") as f:
        m = mmap.mmap(f.fileno(), 0, flags=mmap.MAP_PRIVATE,
                      prot=mmap.PROT_READ)
    try:
        a = np.frombuffer(m, dtype=np.uint8)
        total = 0
        for off, ln, _ in tensor_ranges(st):     # header order = file order
            total += int(a[off:off + ln:4096].sum())
        del a
    finally:
        m.close()
    return sum(r[1] for r in tensor_ranges(st))


def _threads(st, flags, aligned):
    size = os.path.getsize(st)
    chunks = list(range(0, size, CHUNK))
    lock = threading.Lock()
    done = [0]

    def work():
        fd = os.open(st, os.O_RDONLY | flags)
        buf = mmap.mmap(-1, CHUNK) if aligned else bytearray(CHUNK)
        try:
            while True:
                with lock:
                    if not chunks:
                        return
                    off = chunks.pop(0)
                n = os.preadv(fd, [buf], off)
                with lock:
                    done[0] += n
        finally:
            os.close(fd)
    ts = [threading.Thread(target=work) for _ in range(THREADS)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    assert done[0] == size, (st, done[0], size)
    return size


def p_prefetch(place):
    return _threads(place["st"], 0, False)


def p_direct(place):
    return _threads(place["st"], os.O_DIRECT, True)


def p_torch(place):
    if place.get("bin_files"):
        n = 0
        for p in place["bin_files"]:
            with open(p, "rb") as f:
                b = bytearray(f.read())
            torch.frombuffer(b, dtype=torch.float16)
            n += len(b)
        return n
    sd = torch.load(place["bin"])
    return sum(v.numel() * v.element_size() for v in sd.values())


def p_cat(place):
    files = place.get("files") or [place["st"]]
    subprocess.run(["sh", "-c", 'cat "$@" > /dev/null', "cat"] + files,
                   check=True)
    return sum(os.path.getsize(p) for p in files)


FN = {"safe_open": p_safe_open, "prefetch": p_prefetch, "direct": p_direct,
      "torch.load": p_torch, "cat": p_cat}


# ---- places ---------------------------------------------------------------

def drop_caches():
    os.sync()
    with open("/proc/sys/vm/drop_caches", "w") as f:
        f.write("3\n")


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    p = s.getsockname()[1]
    s.close()
    return p


class Places:
    def __init__(self, work, st, binp, img):
        self.work, self.st, self.binp, self.img = work, st, binp, img
        self.mnts = []
        self.port = free_port()
        self.srv = subprocess.Popen(
            [sys.executable, os.path.join(os.path.dirname(HERE),
                                          "servers", "pacedhttp.py"),
             os.path.dirname(st), str(self.port), str(1000 * 1000 * 1000)])
        time.sleep(1)
        self.cache = os.path.join(work, "cache")

    def mnt(self, name):
        d = os.path.join(self.work, "mnt-" + name)
        os.makedirs(d, exist_ok=True)
        return d

    def stfs(self, src, name, *opts):
        m = self.mnt(name)
        r = subprocess.run([T.STFS, "mount"] + list(opts) + [src, m],
                           capture_output=True)
        assert r.returncode == 0, r.stderr
        self.mnts.append(m)
        return m

    def unmount_all(self):
        for m in self.mnts:
            subprocess.run(["fusermount3", "-u", m], capture_output=True)
            T.wait_gone(m)
        self.mnts = []

    def open(self, place):
        """Fresh mounts for place (caches dropped by the caller)."""
        if place == "file":
            return {"st": self.st, "bin": self.binp}
        if place == "squashfuse":
            m = self.mnt("sq")
            subprocess.run(["squashfuse_ll", self.img, m], check=True)
            self.mnts.append(m)
            return {"st": os.path.join(m, "model.safetensors"),
                    "bin": os.path.join(m, "model.bin")}
        if place == "stfs":
            m = self.stfs(self.st, "st")
            mb = self.stfs(self.binp, "bin")
        else:
            if place == "remote-cold":
                shutil.rmtree(self.cache, ignore_errors=True)
            os.makedirs(self.cache, mode=0o700, exist_ok=True)
            base = "http://127.0.0.1:%d/" % self.port
            m = self.stfs(base + "model.safetensors", "rst",
                          "-o", "cache=" + self.cache)
            mb = self.stfs(base + "model.bin", "rbin",
                           "-o", "cache=" + self.cache)
        names = [k for _, _, k in tensor_ranges(self.st)]
        return {"st": os.path.join(m, "%model.safetensors"),
                "files": [os.path.join(m, k) for k in names],
                "bin_files": [os.path.join(mb, k) for k in names]}

    def close(self):
        self.unmount_all()
        self.srv.kill()
        self.srv.wait()


def fill_cache(places):
    """remote-warm needs the disk cache filled: one read through a mount."""
    p = places.open("remote-warm")
    p_cat(p)
    p_torch(p)
    places.unmount_all()


# ---- the run --------------------------------------------------------------

def measure(places, place, pattern):
    """(cold, warm) rates in bytes/s."""
    places.unmount_all()
    if place == "remote-warm":
        fill_cache(places)
    drop_caches()
    p = places.open(place)
    out = []
    for _ in range(2):
        t = time.perf_counter()
        n = FN[pattern](p)
        out.append(n / (time.perf_counter() - t))
    places.unmount_all()
    return out


def main():
    work = sys.argv[1]
    size = int(sys.argv[2]) * MiB if len(sys.argv) > 2 else 1024 * MiB
    rounds = int(sys.argv[3]) if len(sys.argv) > 3 else 3
    os.makedirs(work, exist_ok=True)
    st, binp, img = make_data(work, size)
    places = Places(work, st, binp, img)
    R = {}      # (pattern, place, state) -> [rates]
    ratio = {}  # (pattern, place, state) -> [ratios to file]
    try:
        for rnd in range(rounds):
            order = PLACES if rnd % 2 == 0 else PLACES[::-1]
            for pattern in PATTERNS:
                got = {pl: measure(places, pl, pattern) for pl in order}
                for pl in PLACES:
                    for i, state in enumerate(("cold", "warm")):
                        k = (pattern, pl, state)
                        R.setdefault(k, []).append(got[pl][i])
                        ratio.setdefault(k, []).append(
                            got[pl][i] / got["file"][i])
            print("round %d done" % (rnd + 1), file=sys.stderr, flush=True)
    finally:
        places.close()
    print("Model: %d MiB (%d tensors), %d rounds; MB/s (ratio to file, "
          "min-max)\n" % (size // MiB, len(tensor_ranges(st)), rounds))
    print("| pattern | state | " + " | ".join(PLACES) + " |")
    print("|---|---|" + "---|" * len(PLACES))
    for pattern in PATTERNS:
        for state in ("cold", "warm"):
            cells = []
            for pl in PLACES:
                k = (pattern, pl, state)
                rate = statistics.median(R[k]) / 1e6
                if pl == "file":
                    cells.append("%.0f" % rate)
                else:
                    r = ratio[k]
                    cells.append("%.0f (%.2fx, %.2f-%.2f)" % (
                        rate, statistics.median(r), min(r), max(r)))
            print("| %s | %s | %s |" % (pattern, state, " | ".join(cells)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
