#!/usr/bin/env python3
"""bench_runai.py WORK [MIB] [ROUNDS]: stfs beside the Run:ai Model
Streamer (vLLM's --load-format runai_streamer), boto3 and huggingface_hub:
the time until every tensor of a model is in Python memory
(docs/performance.md, "Python loaders and the Run:ai Model Streamer").

Runs itself in tests/loaders/py-bench/.venv (scripts/deps.sh bench).  A model of
4 shards of MIB MiB together (default 1024; BF16 tensors of random
bytes) with its index is made in WORK.  Each round runs every case once,
the order reversed every other round; figures are medians over the
rounds and each ratio the median of the rounds' ratios.  Every load ends
with every tensor in a torch tensor of its own (the streamer's are
cloned: its buffer is reused).

- local (the shards evicted from the page cache before each load):
  safe_open(framework="pt") on the files; on a fresh mount of the folder
  (%repo/); the streamer on the files;
- S3 (the tests' Swift), paced (every connection 25 MB/s, the kernel's
  SO_MAX_PACING_RATE on a relay in front of Swift: tests/bench/
  pacedtcp.py) and uncapped: the streamer's S3 client at its default
  concurrency and at 8; safe_open on a cold s3:// mount (an empty cache,
  8 connections, stfs's default, and with connections=32); the same
  mount after `stfs prefetch`
  (the load alone, and the prefetch); boto3's download_file with 8
  threads, then safe_open of the files;
- the Hub emulator (its CDN tests/servers/pacedhttp.py, 25 MB/s a connection):
  snapshot_download(max_workers=8), then safe_open, against safe_open on
  a cold hf:// mount; and the time to the first tensor of each (mount
  and open included).
Each case's most connections open to its server at once is printed
beside its time (the streamer's concurrency counts client instances,
each with connections of its own).
"""
import hashlib
import json
import os
import shutil
import statistics
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
TESTS = os.path.dirname(HERE)
VENV = os.path.join(TESTS, "loaders", "py-bench", ".venv")
if os.path.realpath(sys.prefix) != os.path.realpath(VENV):
    py = os.path.join(VENV, "bin", "python")
    if not os.access(py, os.X_OK):
        sys.exit("bench_runai: no %s: run scripts/deps.sh bench" % VENV)
    os.execv(py, [py] + sys.argv)

sys.path[:0] = [HERE, os.path.join(TESTS, "fixtures"),
                 os.path.join(TESTS, "servers")]
import stfstest as T  # noqa: E402
import hubemu  # noqa: E402
import s3server  # noqa: E402
from fixtures import env, free_port, wait_port  # noqa: E402
import pacedtcp  # noqa: E402

import torch  # noqa: E402
from safetensors import safe_open  # noqa: E402

MiB = 1 << 20
RATE = 25 * 1000 * 1000
SHARDS = 4
PER = 8                      # tensors a shard
NAMES = ["model-%05d-of-%05d.safetensors" % (i + 1, SHARDS)
         for i in range(SHARDS)]


def make_model(d, mib):
    """SHARDS shards of PER BF16 tensors of random bytes, and the index."""
    os.makedirs(d, exist_ok=True)
    n = mib * MiB // (SHARDS * PER) // 2      # elements a tensor
    block = os.urandom(8 * MiB)
    wm = {}
    for i, name in enumerate(NAMES):
        tensors = []
        for k in range(PER):
            t = "model.layers.%d.w%d" % (i * PER + k, k)
            data = (block * (2 * n // len(block) + 1))[:2 * n]
            tensors.append((t, "BF16", [n], data))
            wm[t] = name
        T.write_st(os.path.join(d, name), tensors, {"format": "pt"})
    with open(os.path.join(d, "model.safetensors.index.json"), "w") as f:
        json.dump({"metadata": {"total_size": mib * MiB}, "weight_map": wm},
                  f)
    with open(os.path.join(d, "config.json"), "w") as f:
        json.dump({"model_type": "bench"}, f)


def evict(d):
    """The files under d out of the page cache (written back first: a
    dirty page is not dropped)."""
    for dp, _, fns in os.walk(d):
        for n in fns:
            fd = os.open(os.path.join(dp, n), os.O_RDONLY)
            os.fsync(fd)
            os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
            os.close(fd)


def prime(d):
    for dp, _, fns in os.walk(d):
        for n in fns:
            with open(os.path.join(dp, n), "rb") as f:
                while f.read(8 * MiB):
                    pass


# ---- the loads: each returns {name: tensor} of the whole model --------

def touch(t):
    """Every page of t read (safe_open's "pt" tensors map the file: their
    bytes are read when touched), by numpy, which lets the GIL go (the
    Hub emulator's threads answer meanwhile)."""
    t.contiguous().view(-1).view(torch.uint8).numpy()[::4096].sum()


def load_safe_open(folder, first=None):
    out = {}
    for n in NAMES:
        with safe_open(os.path.join(folder, n), framework="pt") as f:
            for k in f.keys():
                out[k] = f.get_tensor(k)
                touch(out[k])
                if first is not None and not first:
                    first.append(time.time())
    return out


def load_streamer(paths):
    from runai_model_streamer import SafetensorsStreamer
    out = {}
    with SafetensorsStreamer() as s:
        s.stream_files(paths)
        for k, t in s.get_tensors():
            out[k] = t.clone()
    return out


class Clock:
    """The time of one load: from .start() to .done(tensors), called by
    each case with every tensor in memory (and before it unmounts: the
    tensors may map the mount's files); the tensors are checked, once a
    case, and let go."""

    def __init__(self, check):
        self.check = check

    def start(self, name):
        self.name, self.t0, self.el = name, time.time(), None

    def done(self, tensors):
        for t in tensors.values():
            touch(t)
        self.el = time.time() - self.t0
        self.check.check(self.name, tensors)
        tensors.clear()


class Checker:
    """The model's tensors' sha256, to check every load once."""

    def __init__(self, folder):
        self.want = {}
        for k, t in load_safe_open(folder).items():
            self.want[k] = self.digest(t)
        self.seen = set()

    @staticmethod
    def digest(t):
        return hashlib.sha256(
            t.contiguous().view(-1).view(torch.uint8).numpy()).hexdigest()

    def check(self, case, tensors):
        assert len(tensors) == len(self.want), (case, len(tensors))
        if case in self.seen:
            return
        for k, t in tensors.items():
            assert self.digest(t) == self.want[k], (case, k)
        self.seen.add(case)


def mount(src, mnt, cache, *opts):
    shutil.rmtree(cache, ignore_errors=True)
    o = ["-o", "cache=" + cache] + list(opts)
    r = subprocess.run([T.STFS, "mount"] + o + [src, mnt],
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    T._mounts.append(mnt)


def main():
    work = os.path.abspath(sys.argv[1])
    mib = int(sys.argv[2]) if len(sys.argv) > 2 else 1024
    rounds = int(sys.argv[3]) if len(sys.argv) > 3 else 3
    mnt, world = T.bench_dirs(work)
    src = os.path.join(world, "model")
    t0 = time.time()
    make_model(src, mib)
    check = Checker(src)
    print("model: %d MiB in %d shards, made in %.1f s; load average %s" % (
        mib, SHARDS, time.time() - t0, os.getloadavg()), flush=True)
    cache = os.path.join(world, "cache")
    dl = os.path.join(world, "dl")

    # S3: Swift, direct (uncapped) and through the paced relay
    sw = s3server.Swift(os.path.join(world, "swift"))
    sw.bucket("bench")
    for n in os.listdir(src):
        with open(os.path.join(src, n), "rb") as f:
            sw.put("bench", "m/" + n, f.read())
    relay, relay_url = pacedtcp.start(sw.ports["proxy"], RATE)
    T._procs.append(relay)
    s3env = dict(AWS_ACCESS_KEY_ID=s3server.ACCESS,
                 AWS_SECRET_ACCESS_KEY=s3server.SECRET,
                 AWS_REGION="us-east-1", AWS_DEFAULT_REGION="us-east-1",
                 AWS_EC2_METADATA_DISABLED="true",
                 RUNAI_STREAMER_S3_USE_VIRTUAL_ADDRESSING="0",
                 AWS_SHARED_CREDENTIALS_FILE=os.path.join(world, "no"),
                 AWS_CONFIG_FILE=os.path.join(world, "no"),
                 AWS_PROFILE=None, AWS_SESSION_TOKEN=None,
                 AWS_ENDPOINT_URL_S3=None)
    ends = {"paced": relay_url, "uncapped": sw.endpoint}

    # the Hub: the emulator, its CDN pacedhttp.py at 25 MB/s a connection
    files = os.path.join(world, "hubfiles")
    os.makedirs(files)
    cdn_port = free_port()
    cdn = subprocess.Popen([sys.executable,
                            os.path.join(TESTS, "servers", "pacedhttp.py"),
                            files, str(cdn_port), str(RATE)])
    T._procs.append(cdn)
    assert wait_port(cdn_port)
    hub = hubemu.Hub(files, "http://127.0.0.1:%d/" % cdn_port)
    repo = hub.repo("org/bench")
    hub.push(repo, {n: hubemu.Big(os.path.join(src, n)) if
                    n.endswith(".safetensors") else
                    open(os.path.join(src, n), "rb").read()
                    for n in os.listdir(src)})
    hubenv = dict(HF_ENDPOINT=hub.url, HF_HUB_OFFLINE=None, HF_TOKEN=None,
                  HF_HOME=os.path.join(world, "hfhome"),
                  HF_HUB_DISABLE_PROGRESS_BARS="1",
                  HF_HUB_ENABLE_HF_TRANSFER=None)

    clock = Clock(check)

    def s3_case(where, fn):
        def run():
            with env(AWS_ENDPOINT_URL=ends[where], **s3env):
                fn()
        return run

    def streamer_s3(conc):
        def run():
            with env(RUNAI_STREAMER_CONCURRENCY=conc):
                clock.done(load_streamer(["s3://bench/m/" + n
                                          for n in NAMES]))
        return run

    def stfs_cold(conns=None):
        mount("s3://bench/m/", mnt, cache,
              *(["-o", "connections=%d" % conns] if conns else []))
        try:
            clock.done(load_safe_open(os.path.join(mnt, "%repo")))
        finally:
            T.unmount(mnt)

    prefetched = {}

    def stfs_prefetched(where):
        def run():
            mount("s3://bench/m/", mnt, cache)
            t = time.time()
            subprocess.run([T.STFS, "prefetch", "-q", mnt], check=True)
            prefetched.setdefault(where, []).append(time.time() - t)
            T.unmount(mnt)
            # a new mount of the warm cache: the load alone
            r = subprocess.run([T.STFS, "mount", "-o", "cache=" + cache,
                                "s3://bench/m/", mnt], capture_output=True)
            assert r.returncode == 0, r.stderr
            T._mounts.append(mnt)
            try:
                t = time.time()
                clock.done(load_safe_open(os.path.join(mnt, "%repo")))
                prefetched.setdefault(where + " load", []).append(
                    time.time() - t)
            finally:
                T.unmount(mnt)
        return run

    def boto8():
        import boto3
        from boto3.s3.transfer import TransferConfig
        shutil.rmtree(dl, ignore_errors=True)
        os.makedirs(dl)
        c = boto3.client("s3", endpoint_url=os.environ["AWS_ENDPOINT_URL"])
        cfg = TransferConfig(max_concurrency=8, use_threads=True)
        for n in NAMES:
            c.download_file("bench", "m/" + n, os.path.join(dl, n),
                            Config=cfg)
        clock.done(load_safe_open(dl))

    firsts = {}

    def hub_download():
        with env(**hubenv):
            shutil.rmtree(os.path.join(world, "hfhome"), ignore_errors=True)
            from huggingface_hub import snapshot_download
            p = snapshot_download("org/bench", max_workers=8)
        first = []
        out = load_safe_open(p, first)
        firsts.setdefault("hub download", []).append(first[0] - clock.t0)
        clock.done(out)

    def hub_mount():
        # a Hugging Face cache of its own, empty: not the download's
        with env(**dict(hubenv, HF_HOME=os.path.join(world, "hfempty"))):
            mount("hf://org/bench", mnt, cache)
        try:
            first = []
            out = load_safe_open(os.path.join(mnt, "%repo"), first)
            firsts.setdefault("hub mount", []).append(first[0] - clock.t0)
            clock.done(out)
        finally:
            T.unmount(mnt)

    def local_mount():
        mount(src, mnt, cache)
        try:
            clock.done(load_safe_open(os.path.join(mnt, "%repo")))
        finally:
            T.unmount(mnt)

    cases = [
        ("local safe_open", lambda: clock.done(load_safe_open(src))),
        ("local mount safe_open", local_mount),
        ("local streamer", lambda: clock.done(load_streamer(
            [os.path.join(src, n) for n in NAMES]))),
    ]
    for where in ("paced", "uncapped"):
        cases += [
            ("%s streamer default" % where,
             s3_case(where, streamer_s3(None))),
            ("%s streamer 8" % where, s3_case(where, streamer_s3("8"))),
            ("%s stfs cold" % where, s3_case(where, stfs_cold)),
            ("%s stfs cold 32" % where,
             s3_case(where, lambda: stfs_cold(32))),
            ("%s stfs prefetch+load" % where,
             s3_case(where, stfs_prefetched(where))),
            ("%s boto3 8 + safe_open" % where, s3_case(where, boto8)),
        ]
    cases += [("hub snapshot_download+load", hub_download),
              ("hub mount cold", hub_mount)]

    only = os.environ.get("BENCH_ONLY")     # cases whose names have these
    if only:
        cases = [c for c in cases if any(w in c[0] for w in only.split(","))]
    res = {name: [] for name, _ in cases}
    # the most connections each case had open to its server at once
    # (ss, every 50 ms): the streamer's "concurrency" is client instances,
    # each with connections of its own
    ports = {"paced": relay_url.rsplit(":", 1)[1],
             "uncapped": str(sw.ports["proxy"]), "hub": str(cdn_port)}
    peak, now = {}, [None]

    def sample():
        while True:
            name = now[0]
            port = name and ports.get(name.split()[0])
            if port:
                out = subprocess.run(
                    ["ss", "-tnH", "state", "established",
                     "( dport = :%s )" % port],
                    capture_output=True, text=True).stdout
                n = sum(1 for ln in out.splitlines() if ln.strip())
                peak[name] = max(peak.get(name, 0), n)
            time.sleep(0.05)
    import threading
    threading.Thread(target=sample, daemon=True).start()
    try:
        for r in range(rounds):
            order = cases if r % 2 == 0 else cases[::-1]
            for name, fn in order:
                prime(os.path.join(world, "swift"))   # the server's disk
                prime(files)
                evict(src)      # the local cases read from the disk
                clock.start(name)
                now[0] = name
                fn()
                now[0] = None
                el = clock.el
                assert el is not None, name
                res[name].append(el)
                print("round %d %-28s %6.2f s" % (r + 1, name, el),
                      flush=True)
    finally:
        T.unmount(mnt)
        relay.kill()
        relay.wait()
        sw.stop()
        hub.stop()
        cdn.kill()
        cdn.wait()

    gb = mib * MiB / 1e9
    med = {k: statistics.median(v) for k, v in res.items()}
    ratio = lambda a, b: statistics.median(  # noqa: E731
        x / y for x, y in zip(res[a], res[b]))
    print("\n%d MiB, %d rounds, load average at the end %s" % (
        mib, rounds, os.getloadavg()))
    for k, v in med.items():
        print("%-30s %6.2f s  %6.0f MB/s  %s" % (
            k, v, gb * 1000 / v, "%d connections at most" % peak[k]
            if k in peak else ""))
    for where in ("paced", "uncapped"):
        for k in (where + " load",):
            if k in prefetched:
                print("%-30s %6.2f s (the load alone; prefetch %.2f s)" % (
                    where + " after prefetch", statistics.median(
                        prefetched[k]), statistics.median(prefetched[where])))
    print("\nratios (speed of the first over the second, median of rounds):")
    for a, b in [
            ("local safe_open", "local mount safe_open"),
            ("local streamer", "local safe_open"),
            ("local streamer", "local mount safe_open"),
            ("paced streamer 8", "paced stfs cold"),
            ("paced streamer default", "paced stfs cold"),
            ("paced streamer 8", "paced stfs cold 32"),
            ("paced streamer default", "paced stfs cold 32"),
            ("paced boto3 8 + safe_open", "paced stfs cold"),
            ("uncapped streamer 8", "uncapped stfs cold"),
            ("uncapped streamer default", "uncapped stfs cold"),
            ("uncapped streamer 8", "uncapped stfs cold 32"),
            ("uncapped boto3 8 + safe_open", "uncapped stfs cold"),
            ("hub snapshot_download+load", "hub mount cold")]:
        if res.get(a) and res.get(b):
            print("  %-30s / %-28s %5.2fx" % (b, a, ratio(a, b)))
    for k, v in firsts.items():
        print("first tensor, %-16s %6.2f s" % (k, statistics.median(v)))
    if len(firsts) == 2:
        print("first tensor: mount / download-then-load %.3fx" %
              statistics.median(x / y for x, y in zip(
                  firsts["hub mount"], firsts["hub download"])))


if __name__ == "__main__":
    try:
        main()
    finally:
        T._cleanup()
