#!/usr/bin/env python3
"""bench_remote.py WORK OUT [ROUNDS]: stfs reading a URL, side by side with
curl in the same run (docs/performance.md, "Remote").

The benchmark's file (tests/bench/bench.py makes it) is served on 127.0.0.1
twice: by tests/servers/pacedhttp.py with every connection capped at 100 MB/s
(by the kernel's pacing), as object stores cap a connection, and by nginx
without a limit.  Each round, in turn:
  - curl of the 1 GiB tensor's range over one connection, and over 8
    connections at once (8 range requests covering it);
  - stfs: a fresh mount with an empty cache, reading the tensor from start
    to end (a cold read);
  - unlimited: one curl, and a cold stfs read; then what any client that
    keeps the bytes or hands them to another process gets on this
    machine: curl writing them to a new file beside the cache (no fsync,
    where stfs flushes each block), curl handing them through a 1 MiB
    pipe to a reader taking 1 MiB at a time (as FUSE hands them to a
    reader), and a cold stfs read with -o nocache;
  - a warm read: the same tensor again through a new mount whose cache
    holds it, beside a read through a local mount of the file;
  - mounting the 405B-shaped set (191 shards) through a proxy that adds
    10 ms each way (a 20 ms round trip, as to a nearby region), beside
    curl fetching the index and the 191 headers one after another over
    one connection (what a client opening shards in turn waits for);
  - through the same proxy, a fresh mount's first read of 4 KiB in the
    middle of the 1 GiB tensor (a 4 MiB block is fetched), beside a new
    curl getting those 4 KiB (one round trip: the proxy accepts at once).
Medians of ROUNDS (default 3) and ratios of medians of per-round ratios
go to OUT/remote.md.
"""
import fcntl
import json
import os
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
import bench as B  # noqa: E402
from fixtures import Nginx, free_port, wait_port  # noqa: E402

MiB = 1 << 20
F_SETPIPE_SZ = 1031


def curl(url, first, last):
    r = subprocess.run(["curl", "-sf", "-r", "%d-%d" % (first, last), url,
                        "-o", "/dev/null", "-w", "%{size_download}"],
                       capture_output=True, check=True)
    return int(r.stdout)


class Delay:
    """A TCP proxy on 127.0.0.1 to port `to` adding ms milliseconds to each
    chunk in each direction: a WAN round trip on loopback."""

    CODE = r"""
import asyncio, sys
D = float(sys.argv[3]) / 1000
async def pipe(r, w):
    # each chunk goes D after it came, without holding up the next
    loop = asyncio.get_running_loop()
    q = asyncio.Queue()
    async def out():
        try:
            while True:
                t, b = await q.get()
                if b is None:
                    break
                if t + D > loop.time():
                    await asyncio.sleep(t + D - loop.time())
                w.write(b)
                await w.drain()
        except Exception:
            pass
        finally:
            w.close()
    task = asyncio.ensure_future(out())
    try:
        while True:
            b = await r.read(1 << 16)
            if not b:
                break
            q.put_nowait((loop.time(), b))
    except Exception:
        pass
    q.put_nowait((0, None))
    await task
async def handle(cr, cw):
    sr, sw = await asyncio.open_connection("127.0.0.1", int(sys.argv[2]))
    await asyncio.gather(pipe(cr, sw), pipe(sr, cw))
async def main():
    s = await asyncio.start_server(handle, "127.0.0.1", int(sys.argv[1]))
    async with s:
        await s.serve_forever()
asyncio.run(main())
"""

    def __init__(self, to, ms):
        self.port = free_port()
        self.proc = subprocess.Popen([sys.executable, "-c", self.CODE,
                                      str(self.port), str(to), str(ms)])
        T._procs.append(self.proc)
        assert wait_port(self.port), "the delay proxy did not start"

    def stop(self):
        self.proc.kill()
        self.proc.wait()


class Paced:
    """tests/servers/pacedhttp.py serving root, each connection capped at rate
    bytes/s (nginx's limit_rate does not cap requests shorter than a
    second's worth of bytes)."""

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


def mount_time(mnt, url, cache):
    shutil.rmtree(cache, ignore_errors=True)
    t = time.perf_counter()
    subprocess.run([T.STFS, "mount", "-o", "cache=" + cache, url, mnt],
                   check=True)
    dt = time.perf_counter() - t
    T.unmount(mnt)
    return dt


AT = 512 << 20          # where in the tensor: not in the first 64 KiB


def first_byte(mnt, url, cache):
    """Seconds from a fresh mount's first read of 4 KiB in the middle of
    the tensor to its answer."""
    shutil.rmtree(cache, ignore_errors=True)
    subprocess.run([T.STFS, "mount", "-o", "cache=" + cache, url, mnt],
                   check=True)
    try:
        fd = os.open(os.path.join(mnt, "big"), os.O_RDONLY)
        t = time.perf_counter()
        os.pread(fd, 4096, AT)
        dt = time.perf_counter() - t
        os.close(fd)
    finally:
        T.unmount(mnt)
    return dt


def curl_first(url, off):
    """Seconds a new curl takes (by its own clock) to get 4 KiB at off:
    one round trip, as the proxy accepts connections at once."""
    r = subprocess.run(["curl", "-sf", "-r", "%d-%d" % (off, off + 4095),
                        url, "-o", "/dev/null", "-w", "%{time_total}"],
                       capture_output=True, check=True, text=True)
    return float(r.stdout)


def headers_in_turn(base, names):
    """curl: the index, then each shard's first 64 KiB, one connection."""
    cmd = ["curl", "-sf", "-o", "/dev/null", base +
           "model.safetensors.index.json"]
    for n in names:
        cmd += ["-r", "0-65535", "-o", "/dev/null", base + n]
    t = time.perf_counter()
    subprocess.run(cmd, check=True)
    return time.perf_counter() - t


def timed(fn, nbytes, prime=False):
    if prime:
        B.prime_memory()
    t = time.perf_counter()
    fn()
    return nbytes / (time.perf_counter() - t)


def curl_to_file(url, first, last, path):
    """curl writing the range to a new file (what a client that keeps the
    bytes does at least); the file is gone after."""
    try:
        subprocess.run(["curl", "-sf", "-r", "%d-%d" % (first, last), url,
                        "-o", path], check=True)
    finally:
        if os.path.exists(path):
            os.unlink(path)


def curl_to_reader(url, first, last):
    """curl handing the range to this process through a 1 MiB pipe, read
    1 MiB at a time: bytes handed to another process, as FUSE does."""
    r, w = os.pipe()
    try:
        fcntl.fcntl(w, F_SETPIPE_SZ, B.BS)
    except OSError:
        pass
    p = subprocess.Popen(["curl", "-sf", "-r", "%d-%d" % (first, last),
                          url], stdout=w)
    os.close(w)
    T._procs.append(p)
    got = 0
    buf = bytearray(B.BS)
    with open(r, "rb", buffering=0) as f:
        while True:
            k = f.readinto(buf)
            if not k:
                break
            got += k
    if p.wait() or got != last - first + 1:
        raise IOError("curl into a pipe: %d bytes, exit %d" % (got,
                                                              p.returncode))
    return got


def main():
    work, out = sys.argv[1], sys.argv[2]
    rounds = int(sys.argv[3]) if len(sys.argv) > 3 else 3
    os.makedirs(out, exist_ok=True)
    src, offs, _, _, _, _ = B.make_data(work)
    boff, bsize = offs["big"]
    d = os.path.join(work, "remote")
    shutil.rmtree(d, ignore_errors=True)
    os.makedirs(d)
    root = os.path.dirname(src)
    name = os.path.basename(src)
    # the capped server: 100 MB/s per connection, paced by the kernel
    lim = Paced(root, 100 * 1000 * 1000)
    free = Nginx(os.path.join(d, "free"), root)
    mnt = os.path.join(d, "mnt")
    os.makedirs(mnt)
    pin = B.Pin(src)
    R = {k: [] for k in ("curl1", "curl8", "cold", "curl1_free",
                         "cold_free", "curl_file", "curl_pipe",
                         "cold_nocache", "warm", "local", "mount", "turns",
                         "first", "rtt")}
    shards = os.path.join(work, "405b")
    sh_names = sorted(n for n in os.listdir(shards)
                      if n.endswith(".safetensors"))
    whole = Nginx(os.path.join(d, "whole"), work)
    delay = Delay(whole.port, 10)
    sh_url = "http://127.0.0.1:%d/405b/" % delay.port
    far_url = "http://127.0.0.1:%d/%s" % (delay.port,
                                          os.path.relpath(src, work))

    def stfs_read(url, cache, fresh=True, opt=None):
        if fresh:
            shutil.rmtree(cache, ignore_errors=True)
        with B.Mount(mnt, url, "-o", opt or "cache=" + cache) as m:
            return B.read_range(os.path.join(m, "big"))

    def eight(url):
        per = bsize // 8
        th = [threading.Thread(target=curl, args=(
            url, boff + i * per, boff + (i + 1) * per - 1))
            for i in range(8)]
        for t in th:
            t.start()
        for t in th:
            t.join()
    cache = os.path.join(d, "cache")
    try:
        for r in range(rounds + 1):
            vals = {
                "curl1": timed(lambda: curl(lim.url(name), boff,
                                            boff + bsize - 1), bsize),
                "curl8": timed(lambda: eight(lim.url(name)), bsize),
                "cold": stfs_read(lim.url(name), cache),
                "curl1_free": timed(lambda: curl(free.url(name), boff,
                                                 boff + bsize - 1), bsize,
                                    prime=True),
                "cold_free": stfs_read(free.url(name), cache),
                # right after: DAMON pages out a cache left alone a while
                "warm": stfs_read(free.url(name), cache, fresh=False),
                "curl_file": timed(lambda: curl_to_file(
                    free.url(name), boff, boff + bsize - 1,
                    os.path.join(d, "curl.out")), bsize, prime=True),
                "curl_pipe": timed(lambda: curl_to_reader(
                    free.url(name), boff, boff + bsize - 1), bsize,
                    prime=True),
                "cold_nocache": stfs_read(free.url(name), cache,
                                          opt="nocache"),
            }
            with B.Mount(mnt, src) as m:
                vals["local"] = B.read_range(os.path.join(m, "big"))
            vals["mount"] = mount_time(mnt, sh_url, cache)
            vals["turns"] = headers_in_turn(sh_url, sh_names)
            vals["first"] = first_byte(mnt, far_url, cache)
            vals["rtt"] = curl_first(far_url, boff + AT)
            if r == 0:
                continue                # a warm-up round, not counted
            for k, v in vals.items():
                R[k].append(v)
            print("round %d: %s" % (r, ", ".join(
                "%s %.0f MB/s" % (k, v / 1e6) if v > 100 else
                "%s %.0f ms" % (k, v * 1e3) for k, v in vals.items())),
                flush=True)
    finally:
        pin.release()
        delay.stop()
        whole.stop()
        lim.stop()
        free.stop()

    def med(k):
        return statistics.median(R[k]) / 1e6

    def ratio(a, b):
        return statistics.median(x / y for x, y in zip(R[a], R[b]))
    rows = [
        ("cold read, 100 MB/s per connection", med("cold"),
         "1 curl %.0f" % med("curl1"), ratio("cold", "curl1"), 4.0),
        ("cold read vs 8 curls in parallel", med("cold"),
         "8 curls %.0f" % med("curl8"), ratio("cold", "curl8"), 0.8),
        ("cold read, no limit", med("cold_free"),
         "1 curl %.0f" % med("curl1_free"), ratio("cold_free", "curl1_free"),
         0.7),
        ("cold read, no limit, -o nocache", med("cold_nocache"),
         "1 curl %.0f" % med("curl1_free"),
         ratio("cold_nocache", "curl1_free"), 0.7),
        ("warm read from the disk cache", med("warm"),
         "local mount %.0f" % med("local"), ratio("warm", "local"), 0.8),
    ]
    lines = ["| 1 GiB tensor over HTTP (median of %d, MB/s) | stfs | "
             "baseline | ratio | target |" % rounds, "|---|---|---|---|---|"]
    for name_, v, base, rt, target in rows:
        lines.append("| %s | %.0f | %s | %.2fx | >= %.1fx: %s |" % (
            name_, v, base, rt, target, "met" if rt >= target else
            "**missed**"))
    # what curl itself gets, on this machine, doing what stfs must do
    lines += ["", "| no limit: what a client doing what stfs must do gets "
              "(median of %d, MB/s) | MB/s | ratio to 1 curl | stfs's ratio "
              "to it |" % rounds, "|---|---|---|---|"]
    for name_, k, mine in (
            ("curl writing the bytes to a new file beside the cache "
             "(stfs: cold read, cache on)", "curl_file", "cold_free"),
            ("curl handing the bytes to a reader through a 1 MiB pipe "
             "(stfs: cold read, -o nocache)", "curl_pipe", "cold_nocache")):
        lines.append("| %s | %.0f | %.2fx | %.2fx |" % (
            name_, med(k), ratio(k, "curl1_free"), ratio(mine, k)))
    # times: stfs against a baseline, at most `most` times it
    for title, row, a, b, most, goal in (
            ("405B-shaped set (191 shards) over a 20 ms round trip",
             "mount time | stfs mount | index + headers in turn (curl)",
             "mount", "turns", 0.25, "<= 0.25x"),
            ("first read after mount, 20 ms round trip",
             "first byte | stfs: 4 KiB of a tensor | curl: 4 KiB, one "
             "round trip", "first", "rtt", 2.0, "<= 2 round trips")):
        name_, col_a, col_b = row.split(" | ")
        rt = ratio(a, b)
        lines += ["", "| %s (median of %d, ms) | %s | %s | ratio | target |"
                  % (title, rounds, col_a, col_b), "|---|---|---|---|---|",
                  "| %s | %.0f | %.0f | %.2fx | %s: %s |" % (
                      name_, statistics.median(R[a]) * 1e3,
                      statistics.median(R[b]) * 1e3, rt, goal,
                      "met" if rt <= most else "**missed**")]
    text = "\n".join(lines) + "\n"
    with open(os.path.join(out, "remote.md"), "w") as f:
        f.write(text)
    with open(os.path.join(out, "remote.json"), "w") as f:
        json.dump(R, f, indent=1)
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
