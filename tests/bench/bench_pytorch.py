#!/usr/bin/env python3
"""bench_pytorch.py: a PyTorch checkpoint mounted, side by side in one run.

Writes WORKDIR/ck.bin with torch.save (SIZE GiB, default 4: F32 and BF16
tensors of 64 MiB, a state dict as transformers writes it), then measures:

  mount          time of `stfs inspect` (the whole open path) and of a
                 mount until the mount point is up, local file;
  mount over     a mount of http://127.0.0.1/ck.bin from nginx without a
  HTTP           cache: range requests and bytes fetched (nginx's access
                 log), against the pickle's size (the target: <= pickle +
                 1 MiB, <= 3 requests);
  read           cat of one 64 MiB tensor from the .bin mount vs the same
                 bytes from a mount of the safetensors copy;
  cp             cat of %model.safetensors (> /dev/null and cp to disk) vs
                 cat / cp of the .bin itself;
  torch.load     torch.load + writing the same tensors as a safetensors
                 file (the usual conversion), in a child process: time and
                 peak RSS, vs cp of %model.safetensors (cp's peak RSS and
                 the daemon's RSS after it).

Page caches are warm for all (the file was just written): the figures
compare the code paths, not the disk.  Each timing is the median of
ROUNDS (default 3).  Prints a markdown table.
Usage: bench_pytorch.py WORKDIR [SIZE_GIB] [ROUNDS]
"""
import json
import os
import re
import shutil
import statistics
import struct
import subprocess
import sys
import time
import zipfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path[:0] = [HERE] + [os.path.join(os.path.dirname(HERE), d)
                         for d in ("fixtures", "servers")]
import stfstest as T  # noqa: E402
from fixtures import Nginx  # noqa: E402


def make(path, gib):
    code = r"""
import collections, torch
sd = collections.OrderedDict()
n = %d * 16
for i in range(n):
    dt = torch.bfloat16 if i %% 4 == 3 else torch.float32
    numel = (64 << 20) // (2 if dt == torch.bfloat16 else 4)
    t = torch.empty(numel // 4096, 4096, dtype=dt)
    t.view(-1)[:4096] = i
    sd["model.layers.%%d.w" %% i] = t
torch.save(sd, %r)
""" % (gib, path)
    subprocess.run(["/usr/bin/python3", "-c", code], check=True)


def rss_anon_kb(pid):
    """The daemon's own memory: RssAnon (its map of the source shows in
    RssFile, pages of the page cache that every reader shares)."""
    with open("/proc/%d/status" % pid) as f:
        for line in f:
            if line.startswith("RssAnon:"):
                return int(line.split()[1])
    return 0


def timed(fn, rounds):
    ts = []
    for _ in range(rounds):
        t = time.perf_counter()
        fn()
        ts.append(time.perf_counter() - t)
    return statistics.median(ts)


def child(cmd):
    """Run cmd; (seconds, its own peak RSS in KiB, from wait4)."""
    t = time.perf_counter()
    p = subprocess.Popen(cmd, stdout=subprocess.DEVNULL)
    _, status, ru = os.wait4(p.pid, 0)
    el = time.perf_counter() - t
    p.returncode = os.waitstatus_to_exitcode(status)
    assert p.returncode == 0, cmd
    return el, ru.ru_maxrss


CONVERT = r"""
import json, struct, sys, torch
sd = torch.load(sys.argv[1])
DT = {torch.float32: "F32", torch.bfloat16: "BF16"}
hdr, off, ts = {}, 0, []
for k, t in sd.items():
    t = t.contiguous()
    n = t.numel() * t.element_size()
    hdr[k] = {"dtype": DT[t.dtype], "shape": list(t.shape),
              "data_offsets": [off, off + n]}
    off += n
    ts.append(t)
h = json.dumps(hdr).encode()
h += b" " * (-len(h) % 8)
with open(sys.argv[2], "wb") as f:
    f.write(struct.pack("<Q", len(h)))
    f.write(h)
    for t in ts:
        v = t.view(torch.int16) if t.dtype == torch.bfloat16 else t
        f.write(v.numpy().tobytes())
"""


def main():
    work = sys.argv[1]
    gib = int(sys.argv[2]) if len(sys.argv) > 2 else 4
    rounds = int(sys.argv[3]) if len(sys.argv) > 3 else 3
    os.makedirs(work, exist_ok=True)
    ck = os.path.join(work, "www", "ck.bin")
    os.makedirs(os.path.dirname(ck), exist_ok=True)
    if not os.path.exists(ck) or os.path.getsize(ck) < gib << 30:
        make(ck, gib)
    size = os.path.getsize(ck)
    with zipfile.ZipFile(ck) as z:
        pkl = [i for i in z.infolist() if i.filename.endswith("/data.pkl")]
        pkl_size = pkl[0].file_size
    mnt = os.path.join(work, "mnt")
    os.makedirs(mnt, exist_ok=True)
    rows = []

    def row(what, value, base=None, note=""):
        rows.append((what, value, base, note))

    # mount, local
    t_inspect = timed(lambda: subprocess.run(
        [T.STFS, "inspect", ck], check=True, stdout=subprocess.DEVNULL),
        rounds)

    ts = []
    for _ in range(rounds):
        t = time.perf_counter()
        p = T.mount_fg(ck, mnt)
        ts.append(time.perf_counter() - t)
        T.stop_fg(p, mnt)
    tiny = os.path.join(work, "tiny.safetensors")
    T.write_st(tiny, [("a", "F32", [1], b"\0" * 4)])
    t_tiny = timed(lambda: subprocess.run(
        [T.STFS, "inspect", tiny], check=True, stdout=subprocess.DEVNULL),
        rounds)
    row("inspect of the %.1f GiB .bin" % (size / 2**30),
        "%.3f s" % t_inspect, "%.3f s" % t_tiny,
        "baseline: inspect of a 1-tensor safetensors file (process "
        "start); the open itself is the difference")
    row("mount until the mount point is up", "%.3f s" %
        statistics.median(ts), note="includes polling /proc every 10 ms")

    # mount over HTTP: what is fetched
    ng = Nginx(os.path.join(work, "ng"), os.path.dirname(ck))
    try:
        t = time.perf_counter()
        p = T.mount_fg(ng.url("ck.bin"), mnt, "-o", "nocache")
        t_http = time.perf_counter() - t
        rr = ng.ranges()
        T.stop_fg(p, mnt)
    finally:
        ng.stop()
    fetched = sum(b - a + 1 for a, b in rr)
    row("mount over HTTP (nginx, -o nocache)", "%.3f s" % t_http)
    row("  range requests at mount", "%d" % len(rr), note="target <= 3")
    row("  bytes fetched at mount", "%d" % fetched,
        note="pickle %d B; target <= pickle + 1 MiB = %d" %
        (pkl_size, pkl_size + (1 << 20)))

    # reads: one tensor, .bin mount vs safetensors mount of the copy
    st = os.path.join(work, "ck.safetensors")
    p = T.mount_fg(ck, mnt)
    try:
        virt = os.path.join(mnt, "%model.safetensors")
        t_cat_virt = timed(lambda: subprocess.run(
            ["cat", virt], check=True, stdout=subprocess.DEVNULL), rounds)
        t_cat_bin = timed(lambda: subprocess.run(
            ["cat", ck], check=True, stdout=subprocess.DEVNULL), rounds)
        t_cp_virt, rss_cp = child(["cp", virt, st])
        daemon_rss = rss_anon_kb(p.pid)
        t_cp_bin, _ = child(["cp", ck, st + ".bincopy"])
        os.unlink(st + ".bincopy")
        tensor = os.path.join(mnt, "model", "layers", "0", "w")
        t_t_bin = timed(lambda: subprocess.run(
            ["cat", tensor], check=True, stdout=subprocess.DEVNULL), rounds)
    finally:
        T.stop_fg(p, mnt)
    p = T.mount_fg(st, mnt)
    try:
        t_t_st = timed(lambda: subprocess.run(
            ["cat", tensor], check=True, stdout=subprocess.DEVNULL), rounds)
        t_cat_stvirt = timed(lambda: subprocess.run(
            ["cat", virt], check=True, stdout=subprocess.DEVNULL), rounds)
    finally:
        T.stop_fg(p, mnt)
    row("cat %model.safetensors of the safetensors copy's mount",
        "%.2f s" % t_cat_stvirt, note="the same bytes, for scale: the "
        ".bin's is %.2fx of it" % (t_cat_stvirt / t_cat_virt))
    row("cat of a 64 MiB tensor, .bin mount", "%.3f s" % t_t_bin,
        "%.3f s" % t_t_st, "vs the safetensors mount: %.2fx" %
        (t_t_st / t_t_bin))
    row("cat %model.safetensors > /dev/null", "%.2f s" % t_cat_virt,
        "%.2f s" % t_cat_bin, "vs cat of the .bin: %.2fx" %
        (t_cat_bin / t_cat_virt))
    row("cp %model.safetensors to disk", "%.2f s, cp %d MiB RSS, daemon "
        "%d MiB anonymous" % (t_cp_virt, rss_cp // 1024, daemon_rss // 1024),
        "%.2f s" % t_cp_bin, "vs cp of the .bin: %.2fx" %
        (t_cp_bin / t_cp_virt))
    os.unlink(st)
    # the usual conversion
    out = os.path.join(work, "conv.safetensors")
    t_conv, rss_conv = child(["/usr/bin/python3", "-c", CONVERT, ck, out])
    os.unlink(out)
    row("torch.load + safetensors write", "%.2f s, %d MiB peak RSS" %
        (t_conv, rss_conv // 1024), "%.2f s" % t_cp_virt,
        "cp of %%model.safetensors is %.1fx faster" % (t_conv / t_cp_virt))

    print("| measure | stfs | baseline | note |")
    print("|---|---|---|---|")
    for what, v, b, note in rows:
        print("| %s | %s | %s | %s |" % (what, v, b or "", note))


if __name__ == "__main__":
    main()
