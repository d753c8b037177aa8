#!/usr/bin/env python3
"""bench_s3_peers.py WORK [MIB] [ROUNDS]: stfs beside the other ways to read
one safetensors file from S3, each with its defaults (issue 52's table;
docs/performance.md).

One file of MIB MiB (default 1024: 32 F32 tensors of random bytes) is put
in the tests' Swift (its S3 API), which is read directly ("uncapped") and
through tests/bench/pacedtcp.py ("paced": every connection 25 MB/s, the
kernel's SO_MAX_PACING_RATE, as S3 gives one connection: the network's
ceiling is then set by how many connections a tool opens).  Every round
runs each case once, the order reversed every other round (A B .. B A);
a mount is new and its cache empty in each case, the server's files read
once before each (from memory, as S3's would be).  Cases, where the tool
is there (missing ones are named and skipped):

- `cat` of the file through a mount, and "safe_open": every tensor
  copied out of a mapping of the file, in order (safetensors' safe_open,
  from tests/loaders/py-bench/.venv when it is there, else the same by hand:
  numpy's copy of each tensor out of an mmap, which is what safe_open
  does): stfs (defaults; and connections=N for each N of STFS_CONNS,
  "32" unless set, as case "stfs-N"), Mountpoint for Amazon S3
  (`mount-s3`: MOUNT_S3=, else build-mount-s3/mount-s3, which
  scripts/build-mountpoint-s3.sh builds from its source), s3fs and rclone
  (Debian; scripts/deps.sh bench);
- curl: 8 and 32 range requests at once covering the file (to
  /dev/null, each signed by the tests' SigV4: s3server.sign());
- boto3's download_file (its defaults: 10 threads), from
  tests/loaders/py-bench/.venv, timed in its process from the client's making
  (Python's start and boto3's import not counted);
- the first tensor (32 MiB at the file's start, after the header): from
  the mount command to its last byte for each mount, and boto3's ranged
  get_object.

Prints the medians (MB/s, spread over the rounds), the load average, the
most connections each case had open at once, for stfs the bytes it had
fetched and the range requests it had made when the reader was done
(`stfs stats --json`, before the unmount), and the ratios of stfs to each
peer.  BENCH_ONLY=A,B keeps the cases whose names hold A or B.
"""
import json
import os
import shutil
import statistics
import struct
import subprocess
import sys
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
TESTS = os.path.dirname(HERE)
ROOT = os.path.dirname(TESTS)
sys.path[:0] = [HERE, os.path.join(TESTS, "fixtures"),
                 os.path.join(TESTS, "servers")]
import stfstest as T  # noqa: E402
import s3server  # noqa: E402
import pacedtcp  # noqa: E402

MiB = 1 << 20
RATE = 25 * 1000 * 1000
REGION = "us-east-1"
VENV_PY = os.path.join(TESTS, "loaders", "py-bench", ".venv", "bin", "python")


def make_file(path, mib):
    """32 F32 tensors of random bytes, mib MiB together."""
    n = 32
    each = mib * MiB // n
    chunk = os.urandom(8 * MiB)
    data = (chunk * (each // len(chunk) + 1))[:each]
    T.write_st(path, [("t.%02d" % i, "F32", [each // 4], data)
                      for i in range(n)])
    return each


def header_end(path):
    with open(path, "rb") as f:
        return 8 + struct.unpack("<Q", f.read(8))[0]


def drop(path):
    """Path's pages out of the page cache (a mount's own are gone with the
    mount; this is for downloads)."""
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:
        return
    os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
    os.close(fd)


def prime(d):
    for dp, _, fns in os.walk(d):
        for n in fns:
            with open(os.path.join(dp, n), "rb") as f:
                while f.read(8 * MiB):
                    pass


SAFE_OPEN = r"""
import json, mmap, struct, sys
path = sys.argv[1]
try:
    from safetensors import safe_open
    with safe_open(path, framework="np") as f:
        for k in f.keys():
            f.get_tensor(k)     # a copy out of the mapping
except ImportError:
    import numpy as np
    with open(path, "rb") as fh:
        n = struct.unpack("<Q", fh.read(8))[0]
        hdr = json.loads(fh.read(n))
        mm = mmap.mmap(fh.fileno(), 0, prot=mmap.PROT_READ)
        for k, v in hdr.items():
            if k == "__metadata__":
                continue
            a, b = v["data_offsets"]
            np.frombuffer(mm, np.uint8, b - a, 8 + n + a).copy()
"""


def safe_open_read(path):
    py = VENV_PY if os.access(VENV_PY, os.X_OK) else "/usr/bin/python3"
    subprocess.run([py, "-c", SAFE_OPEN, path], check=True)


def cat(path):
    subprocess.run(["cat", path], stdout=subprocess.DEVNULL, check=True)


class Mounts:
    """How each tool mounts bucket/prefix at mnt from endpoint (a command
    that returns once the mount is there), and where the file then is."""

    def __init__(self, world, size):
        self.world, self.size = world, size
        self.mount_s3 = os.environ.get("MOUNT_S3") or os.path.join(
            ROOT, "build-mount-s3", "mount-s3")

    def have(self, tool):
        if tool == "mount-s3":
            return os.access(self.mount_s3, os.X_OK)
        return tool == "stfs" or shutil.which(tool) is not None

    def mount(self, tool, endpoint, mnt, opts=()):
        cache = os.path.join(self.world, "cache-" + tool)
        shutil.rmtree(cache, ignore_errors=True)
        env = dict(os.environ, AWS_ACCESS_KEY_ID=s3server.ACCESS,
                   AWS_SECRET_ACCESS_KEY=s3server.SECRET,
                   AWS_REGION=REGION, AWS_DEFAULT_REGION=REGION,
                   AWS_EC2_METADATA_DISABLED="true",
                   AWS_ENDPOINT_URL=endpoint,
                   AWSACCESSKEYID=s3server.ACCESS,
                   AWSSECRETACCESSKEY=s3server.SECRET)
        # (a CA bundle of the environment's makes rclone's S3 client fail
        # on a plain http endpoint)
        env.pop("AWS_CA_BUNDLE", None)
        if tool == "stfs":
            cmd = [T.STFS, "mount", "-o", "cache=" + cache] + list(opts) + \
                  ["s3://bench/m/", mnt]
            where = os.path.join(mnt, "%repo", "model.safetensors")
        elif tool == "mount-s3":
            cmd = [self.mount_s3, "bench", mnt, "--prefix", "m/",
                   "--endpoint-url", endpoint, "--force-path-style",
                   "--region", REGION, "--read-only"]
            where = os.path.join(mnt, "model.safetensors")
        elif tool == "s3fs":
            # (keys from the environment: the tests' access key has a
            # colon, which a passwd file cannot hold)
            cmd = ["s3fs", "bench:/m", mnt, "-o", "url=" + endpoint,
                   "-o", "use_path_request_style", "-o", "ro"]
            where = os.path.join(mnt, "model.safetensors")
        else:   # rclone
            cmd = ["rclone", "mount", ":s3:bench/m", mnt, "--daemon",
                   "--read-only", "--s3-provider", "Other",
                   "--s3-endpoint", endpoint, "--s3-access-key-id",
                   s3server.ACCESS, "--s3-secret-access-key",
                   s3server.SECRET, "--s3-region", REGION,
                   "--s3-force-path-style"]
            where = os.path.join(mnt, "model.safetensors")
        r = subprocess.run(cmd, env=env, capture_output=True, text=True,
                           timeout=120)
        assert r.returncode == 0, (tool, r.stderr)
        T._mounts.append(mnt)
        end = time.time() + 60
        while not os.path.exists(where):
            assert time.time() < end, (tool, "no file at", where)
            time.sleep(0.05)
        return where


def curl_ranges(endpoint, size, n):
    """n signed range requests at once, covering the object (signed here:
    curl's --aws-sigv4 cannot take the tests' access key, which has a
    colon)."""
    per = (size + n - 1) // n
    host = endpoint.split("://", 1)[1]
    path = "/bench/m/model.safetensors"
    ps = []
    for i in range(n):
        a, z = i * per, min(size, (i + 1) * per) - 1
        h = s3server.sign("GET", host, path, "", b"", s3server.ACCESS,
                          s3server.SECRET,
                          {"Range": "bytes=%d-%d" % (a, z)})
        cmd = ["curl", "-sf", "-o", "/dev/null"]
        for k, v in h.items():
            if k != "Host":
                cmd += ["-H", "%s: %s" % (k, v)]
        ps.append(subprocess.Popen(cmd + [endpoint + path]))
    for p in ps:
        assert p.wait() == 0, "curl failed"


BOTO = r"""
import sys, time, boto3
ep, dest, first = sys.argv[1], sys.argv[2], int(sys.argv[3])
t = time.time()
c = boto3.client("s3", endpoint_url=ep)
if first:
    c.get_object(Bucket="bench", Key="m/model.safetensors",
                 Range="bytes=0-%d" % (first - 1))["Body"].read()
else:
    c.download_file("bench", "m/model.safetensors", dest)
print(time.time() - t)
"""


def boto(endpoint, dest, first=0):
    """Seconds from the client's making (Python and boto3 started and
    imported before: not counted) to the last byte."""
    env = dict(os.environ, AWS_ACCESS_KEY_ID=s3server.ACCESS,
               AWS_SECRET_ACCESS_KEY=s3server.SECRET, AWS_REGION=REGION,
               AWS_DEFAULT_REGION=REGION, AWS_EC2_METADATA_DISABLED="true")
    env.pop("AWS_CA_BUNDLE", None)
    r = subprocess.run([VENV_PY, "-c", BOTO, endpoint, dest, str(first)],
                       env=env, check=True, capture_output=True, text=True)
    return float(r.stdout.split()[-1])


FETCHED = {}       # case: [(MB fetched, range requests)] of each round


def stfs_fetched(mnt):
    """What an stfs mount has fetched so far: (MB, range requests)."""
    r = subprocess.run([T.STFS, "stats", "--json", mnt],
                       capture_output=True, text=True)
    if r.returncode:
        return None
    nb = nr = 0
    for m in json.loads(r.stdout)["metrics"]:
        lab = m.get("labels", {})
        if m["name"] == "stfs_fetched_bytes_total" and \
                lab.get("tier") == "origin":
            nb += m["value"]
        if m["name"] == "stfs_http_requests_total" and \
                lab.get("kind") == "range":
            nr += m["value"]
    return nb / 1e6, int(nr)


def run_rounds(cases, rounds, world, dl, ports):
    """Every case once a round, the order reversed every other round:
    {case: [seconds]}, and the most connections each had open at once
    (ss, every 50 ms)."""
    res = {name: [] for name, _, _ in cases}
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
    threading.Thread(target=sample, daemon=True).start()
    for r in range(rounds):
        order = cases if r % 2 == 0 else cases[::-1]
        for name, fn, _ in order:
            prime(os.path.join(world, "swift"))
            drop(dl)
            now[0] = name
            el = fn()
            now[0] = None
            res[name].append(el)
            print("round %d %-32s %7.2f s" % (r + 1, name, el),
                  flush=True)
    return res, peak


def report(res, nbytes, peak, mib, rounds):
    """The table (MB/s medians and spreads) and stfs's ratios to each
    peer."""
    print("\n%d MiB, %d rounds, load average at the end %s" % (
        mib, rounds, " ".join("%.1f" % x for x in os.getloadavg())))
    print("| case | MB/s (median) | spread | s (median) | connections "
          "| MB fetched, range requests (median) |")
    print("|---|---|---|---|---|---|")
    for k, v in res.items():
        rate = sorted(nbytes[k] / 1e6 / x for x in v)
        got = FETCHED.get(k)
        print("| %s | %.0f | %.0f-%.0f | %.2f | %s | %s |" % (
            k, statistics.median(rate), rate[0], rate[-1],
            statistics.median(v), peak.get(k, ""),
            "%.0f MB, %d" % (statistics.median(g[0] for g in got),
                             statistics.median(g[1] for g in got))
            if got else ""))
    print("\nstfs against each peer (speed ratio, median of the rounds'):")
    for where in ("paced", "uncapped"):
        for what in ("cat", "safe_open", "first tensor"):
            mine = "%s stfs %s" % (where, what)
            for k in res:
                if not k.startswith(where + " ") or k == mine or \
                        mine not in res or "stfs" in k.split()[1]:
                    continue
                if what != "first tensor" and k.endswith("first tensor"):
                    continue
                if what == "first tensor" and not k.endswith(what):
                    continue
                if what != "first tensor" and not (
                        k.endswith(what) or "curl" in k or "download" in k):
                    continue
                ratio = statistics.median(
                    (nbytes[mine] / a) / (nbytes[k] / b)
                    for a, b in zip(res[mine], res[k]))
                print("  %-28s / %-32s %5.2fx" % (mine, k, ratio))
    print(json.dumps({k: v for k, v in res.items()}))


def main():
    work = os.path.abspath(sys.argv[1])
    mib = int(sys.argv[2]) if len(sys.argv) > 2 else 1024
    rounds = int(sys.argv[3]) if len(sys.argv) > 3 else 3
    mnt, world = T.bench_dirs(work)
    src = os.path.join(world, "model.safetensors")
    each = make_file(src, mib)
    size = os.path.getsize(src)
    first_end = header_end(src) + each
    sw = s3server.Swift(os.path.join(world, "swift"))
    sw.bucket("bench")
    with open(src, "rb") as f:
        sw.put("bench", "m/model.safetensors", f.read())
    relay, relay_url = pacedtcp.start(sw.ports["proxy"], RATE)
    T._procs.append(relay)
    ends = {"paced": relay_url, "uncapped": sw.endpoint}
    ports = {"paced": relay_url.rsplit(":", 1)[1],
             "uncapped": str(sw.ports["proxy"])}
    m = Mounts(world, size)
    tools = ["stfs", "mount-s3", "s3fs", "rclone"]
    missing = [t for t in tools if not m.have(t)]
    boto_ok = os.access(VENV_PY, os.X_OK)
    print("%d MiB; load average %s; not there (skipped): %s" % (
        mib, " ".join("%.1f" % x for x in os.getloadavg()),
        ", ".join(missing + ([] if boto_ok else ["boto3 (deps.sh bench)"]))
        or "none"), flush=True)

    def fetched(tool, name):
        if tool == "stfs":
            got = stfs_fetched(mnt)
            if got:
                FETCHED.setdefault(name, []).append(got)

    def mounted(tool, where, read, opts=(), name=""):
        def run():
            path = m.mount(tool, ends[where], mnt, opts)
            try:
                t = time.time()
                read(path)
                el = time.time() - t
                fetched(tool, name)
                return el
            finally:
                T.unmount(mnt)
        return run

    def first_tensor(tool, where, opts=(), name=""):
        def run():
            t = time.time()
            path = m.mount(tool, ends[where], mnt, opts)
            try:
                with open(path, "rb") as f:
                    f.seek(first_end - each)
                    left = each
                    while left:
                        b = f.read(min(left, MiB))
                        assert b
                        left -= len(b)
                el = time.time() - t
                fetched(tool, name)
                return el
            finally:
                T.unmount(mnt)
        return run

    def timed(fn):
        def run():
            t = time.time()
            fn()
            return time.time() - t
        return run

    dl = os.path.join(world, "dl.safetensors")
    cases = []
    for where in ("paced", "uncapped"):
        for tool in tools:
            if tool in missing:
                continue
            for what, fn, n in (("cat", mounted, size),
                                ("safe_open", mounted, size),
                                ("first tensor", first_tensor, each)):
                name = "%s %s %s" % (where, tool, what)
                if fn is mounted:
                    run = mounted(tool, where, cat if what == "cat" else
                                  safe_open_read, name=name)
                else:
                    run = first_tensor(tool, where, name=name)
                cases.append((name, run, n))
        for c in os.environ.get("STFS_CONNS", "32").split(","):
            if not c:
                continue
            o = ["-o", "connections=" + c]
            for what in ("cat", "safe_open", "first tensor"):
                name = "%s stfs-%s %s" % (where, c, what)
                if what == "first tensor":
                    cases.append((name, first_tensor("stfs", where, o,
                                                     name), each))
                else:
                    cases.append((name, mounted(
                        "stfs", where, cat if what == "cat" else
                        safe_open_read, o, name), size))
        for n in (8, 32):
            cases.append(("%s curl x%d" % (where, n), timed(
                lambda w=where, k=n: curl_ranges(ends[w], size, k)), size))
        if boto_ok:
            cases += [("%s boto3 download" % where,
                       lambda w=where: boto(ends[w], dl), size),
                      ("%s boto3 first tensor" % where,
                       lambda w=where: boto(ends[w], dl, first_end), each)]
    only = os.environ.get("BENCH_ONLY")
    if only:
        cases = [c for c in cases if any(w in c[0] for w in only.split(","))]
    try:
        res, peak = run_rounds(cases, rounds, world, dl, ports)
    finally:
        T.unmount(mnt)
        relay.kill()
        relay.wait()
        sw.stop()
    report(res, {name: n for name, _, n in cases}, peak, mib, rounds)


if __name__ == "__main__":
    try:
        main()
    finally:
        T._cleanup()
