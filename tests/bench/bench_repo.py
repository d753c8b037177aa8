#!/usr/bin/env python3
"""bench_repo.py: reading a shard through %repo/ against reading the same
bytes through its tensor files, side by side in one run (local source).

Writes WORKDIR/src/model.safetensors (SIZE MiB, default 512: F32 tensors
of 16 MiB) with a config.json beside it, then, each round on a fresh mount
(so the mount's page cache is cold; the source file's is warm):

  repo cat      cat of %repo/model.safetensors (1 MiB reads);
  tensors cat   cat of every tensor file, in file order (the same bytes
                less the header);
  repo mmap     the shard mapped privately (as safe_open and
                torch.UntypedStorage.from_file map it) and touched a 4 KiB
                page at a time, in order (an mmap loader's faults).

Prints the medians of ROUNDS (default 5), MB/s, and the ratio of repo cat
to tensors cat (the issue's target: >= 0.95).
Usage: tests/bench/bench_repo.py WORKDIR [SIZE_MIB] [ROUNDS]
"""
import json
import mmap
import os
import statistics
import struct
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path[:0] = [HERE] + [os.path.join(os.path.dirname(HERE), d)
                         for d in ("fixtures", "servers")]
import stfstest as T  # noqa: E402


def make(path, mib):
    hdr, off, n = {}, 0, mib // 16
    for i in range(n):
        hdr["layers.%d.w" % i] = {"dtype": "F32", "shape": [1024, 4096],
                                  "data_offsets": [off, off + (16 << 20)]}
        off += 16 << 20
    h = json.dumps(hdr).encode()
    h += b" " * (-len(h) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(h)) + h)
        block = os.urandom(1 << 20)
        for _ in range(off >> 20):
            f.write(block)


def cat(paths):
    n = 0
    t = time.perf_counter()
    for p in paths:
        with open(p, "rb", buffering=0) as f:
            while True:
                b = f.read(1 << 20)
                if not b:
                    break
                n += len(b)
    return n, time.perf_counter() - t


def mmap_walk(path):
    t = time.perf_counter()
    with open(path, "rb") as f:
        m = mmap.mmap(f.fileno(), 0, flags=mmap.MAP_PRIVATE,
                      prot=mmap.PROT_READ)
        s = 0
        for off in range(0, len(m), 4096):
            s += m[off]
        n = len(m)
        m.close()
    return n, time.perf_counter() - t


def main():
    wd = sys.argv[1]
    mib = int(sys.argv[2]) if len(sys.argv) > 2 else 512
    rounds = int(sys.argv[3]) if len(sys.argv) > 3 else 5
    src = os.path.join(wd, "src")
    mnt = os.path.join(wd, "mnt")
    os.makedirs(src, exist_ok=True)
    os.makedirs(mnt, exist_ok=True)
    shard = os.path.join(src, "model.safetensors")
    if not os.path.exists(shard) or os.path.getsize(shard) < mib << 20:
        make(shard, mib)
    with open(os.path.join(src, "config.json"), "w") as f:
        f.write("{}")
    names = sorted(json.loads(T.header_of(shard)[1]))
    res = {"repo cat": [], "tensors cat": [], "repo mmap": []}
    for _ in range(rounds):
        for what in res:
            p = T.mount_fg(src, mnt)
            try:
                if what == "repo cat":
                    n, t = cat([os.path.join(mnt, "%repo",
                                             "model.safetensors")])
                elif what == "repo mmap":
                    n, t = mmap_walk(os.path.join(mnt, "%repo",
                                                  "model.safetensors"))
                else:
                    files = [os.path.join(mnt, "layers", k.split(".")[1],
                                          "w") for k in names
                             if k != "__metadata__"]
                    files.sort(key=lambda x: int(x.split("/")[-2]))
                    n, t = cat(files)
                res[what].append(n / t / 1e6)
            finally:
                T.stop_fg(p, mnt)
    med = {k: statistics.median(v) for k, v in res.items()}
    print("| read | MB/s (median of %d) |" % rounds)
    print("|---|---|")
    for k, v in med.items():
        print("| %s | %.0f |" % (k, v))
    print("repo cat / tensors cat: %.2fx" % (med["repo cat"] /
                                            med["tensors cat"]))


if __name__ == "__main__":
    main()
