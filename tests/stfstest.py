"""stfstest.py: shared helpers for the mount tests.

Writing safetensors fixtures, mounting stfs for real (foreground daemon we
own, or the background form), waiting for the mount, unmounting, and making
sure no mount and no daemon is ever left behind, even when a test fails.
Standard library only.
"""
import atexit
import json
import os
import shutil
import signal
import struct
import subprocess
import sys
import tempfile
import time
import traceback

STFS = os.environ.get("STFS", "stfs")
# the real-world corpus, part of the repository (tests/data/real/README.md)
REAL = os.path.join(os.path.dirname(os.path.abspath(__file__)), "data",
                    "real")
# the full corpus, when present beside the clone (its files without a stated
# licence are not in the repository): $STFS_SHARED/data/real, by default
# ../shared/data/real
SHARED_REAL = os.path.join(
    os.environ.get("STFS_SHARED", os.path.join(
        os.path.dirname(os.path.abspath(__file__)), "..", "..", "shared")),
    "data", "real")

BITS = {"BOOL": 8, "F4": 4, "F6_E2M3": 6, "F6_E3M2": 6, "U8": 8, "I8": 8,
        "F8_E5M2": 8, "F8_E4M3": 8, "F8_E8M0": 8, "F8_E4M3FNUZ": 8,
        "F8_E5M2FNUZ": 8, "I16": 16, "U16": 16, "F16": 16, "BF16": 16,
        "I32": 32, "U32": 32, "F32": 32, "C64": 64, "F64": 64, "I64": 64,
        "U64": 64}

_mounts = []
_procs = []


def real_files():
    """Sorted (name, path, expected) of each file of the corpus:
    expected.json's files in REAL, plus those of SHARED_REAL/expected.json
    not in REAL when that is present."""
    out = {}
    for root in (SHARED_REAL, REAL):
        exp = os.path.join(root, "expected.json")
        if root == REAL or os.path.isfile(exp):
            with open(exp) as f:
                for rel, info in json.load(f)["files"].items():
                    out[rel] = (rel, os.path.join(root, rel), info)
    return sorted(out.values())


def nbytes(dtype, shape):
    n = 1
    for d in shape:
        n *= d
    return n * BITS[dtype] // 8


def write_st(path, tensors, metadata=None, pad=True, raw_header=None):
    """tensors: list of (name, dtype, shape, data bytes) in file order."""
    hdr = {}
    if metadata is not None:
        hdr["__metadata__"] = metadata
    off = 0
    for name, dtype, shape, data in tensors:
        hdr[name] = {"dtype": dtype, "shape": list(shape),
                     "data_offsets": [off, off + len(data)]}
        off += len(data)
    h = raw_header if raw_header is not None else \
        json.dumps(hdr, separators=(",", ":")).encode()
    if pad:
        h += b" " * (-len(h) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(h)))
        f.write(h)
        for _, _, _, data in tensors:
            f.write(data)
    return path


def make_405b(d, shards=191, per=6):
    """A sparse 405B-shaped layout: ~810 GB in `shards` files + index."""
    wm = {}
    layer = 0
    for i in range(shards):
        name = "model-%05d-of-%05d.safetensors" % (i + 1, shards)
        hdr, off = {"__metadata__": {"format": "pt"}}, 0
        for k in range(per):
            n = "model.layers.%d.mlp.w%d.weight" % (layer, k)
            size = 16384 * 21568 * 2          # a BF16 [16384, 21568]
            hdr[n] = {"dtype": "BF16", "shape": [16384, 21568],
                      "data_offsets": [off, off + size]}
            wm[n] = name
            off += size
        layer += 1
        h = json.dumps(hdr).encode()
        with open(os.path.join(d, name), "wb") as f:
            f.write(len(h).to_bytes(8, "little") + h)
            f.truncate(8 + len(h) + off)
    with open(os.path.join(d, "model.safetensors.index.json"), "w") as f:
        json.dump({"metadata": {"total_size": 0}, "weight_map": wm}, f)
    return len(wm)


def make_many(path, n=1000000):
    """One file of n one-byte U8 tensors, names like model.layers.L.w.K
    (1,000 per directory): a header of about 75 bytes per tensor."""
    parts = []
    for i in range(n):
        parts.append('"model.layers.%d.w.%d":{"dtype":"U8","shape":[1],'
                     '"data_offsets":[%d,%d]}' % (i // 1000, i % 1000, i,
                                                  i + 1))
    h = ("{" + ",".join(parts) + "}").encode()
    h += b" " * (-len(h) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(h)))
        f.write(h)
        f.write(bytes(i % 251 for i in range(n)))
    return len(h)


def rss_kb(pid):
    with open("/proc/%d/status" % pid) as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    return 0


def header_of(path):
    with open(path, "rb") as f:
        n = struct.unpack("<Q", f.read(8))[0]
        return n, f.read(n)


def is_mount(path):
    p = os.path.realpath(path)
    with open("/proc/self/mountinfo") as f:
        for line in f:
            point = line.split()[4].encode().decode("unicode_escape")
            if point == p:
                return True
    return False


def wait_mount(path, proc=None, timeout=30):
    end = time.time() + timeout
    while time.time() < end:
        if is_mount(path):
            return True
        if proc is not None and proc.poll() is not None:
            return False
        time.sleep(0.01)
    return False


def daemons_for(mnt):
    """pids of stfs processes whose command line names mnt."""
    out = []
    mnt = os.path.abspath(mnt)
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            with open("/proc/%s/cmdline" % pid, "rb") as f:
                args = f.read().split(b"\0")
            with open("/proc/%s/stat" % pid) as f:
                state = f.read().rsplit(")", 1)[1].split()[0]
        except OSError:
            continue
        if state == "Z":
            continue
        if args and os.path.basename(args[0]) == b"stfs" and \
                any(os.path.abspath(a.decode(errors="replace")) == mnt
                    for a in args[1:] if a):
            out.append(int(pid))
    return out


def unmount(mnt):
    """Unmount mnt and give its daemon time to exit (a sanitizer build's
    leak check at exit takes a while), so the next test starts clean."""
    if is_mount(mnt):
        r = subprocess.run(["fusermount3", "-u", mnt], capture_output=True)
        if r.returncode != 0 and is_mount(mnt):
            subprocess.run(["fusermount3", "-u", "-z", mnt],
                           capture_output=True)
    if mnt in _mounts:
        _mounts.remove(mnt)
    wait_gone(mnt)


def mount_fg(src, mnt, *opts):
    """Start `stfs mount -f`, wait for the mount, return the Popen."""
    p = subprocess.Popen([STFS, "mount", "-f"] + list(opts) + [src, mnt],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    _procs.append(p)
    _mounts.append(mnt)
    if not wait_mount(mnt, p):
        out, err = p.communicate(timeout=10) if p.poll() is not None \
            else (b"", b"")
        raise AssertionError("mount of %s failed: %s" %
                             (src, err.decode(errors="replace")))
    return p


def threads_of(pid):
    """Where each thread of pid waits (its name, kernel wait channel and
    system call), for a failure that says why a daemon did not end."""
    out = []
    try:
        for tid in sorted(os.listdir("/proc/%d/task" % pid), key=int):
            t = "/proc/%d/task/%s/" % (pid, tid)
            vals = []
            for f in ("comm", "wchan", "syscall"):
                try:
                    with open(t + f) as fh:
                        vals.append(fh.read().strip().split(" ")[0])
                except OSError:
                    vals.append("?")
            out.append("%s %s/%s/%s" % (tid, *vals))
    except OSError as e:
        return "(%s)" % e
    return "; ".join(out)


def holders(mnt):
    """Processes that may keep a detached mount of mnt alive: those whose
    mount namespace still lists it, or with a descriptor, cwd or root in
    it (for a failure that says why a daemon did not end)."""
    mnt = os.path.abspath(mnt)
    out = []
    for pid in os.listdir("/proc"):
        if not pid.isdigit() or int(pid) == os.getpid():
            continue
        why = []
        try:
            with open("/proc/%s/mountinfo" % pid) as f:
                if any(line.split()[4] == mnt for line in f):
                    why.append("mount")
            for sub in ("cwd", "root"):
                if os.readlink("/proc/%s/%s" % (pid, sub)).startswith(mnt):
                    why.append(sub)
            for fd in os.listdir("/proc/%s/fd" % pid):
                if os.readlink("/proc/%s/fd/%s" % (pid, fd)).startswith(mnt):
                    why.append("fd")
                    break
            if why:
                with open("/proc/%s/comm" % pid) as f:
                    out.append("%s(%s):%s" % (pid, f.read().strip(),
                                              "+".join(why)))
        except OSError:
            continue
    return ", ".join(out) or "none seen"


def stop_fg(p, mnt, timeout=10):
    """Unmount and require the daemon to exit 0 by itself."""
    unmount(mnt)
    err = b""
    try:
        # its stderr read meanwhile: a sanitizer's report at exit may be
        # more than a pipe holds, and is what a failure must show
        err = p.communicate(timeout=timeout)[1] or b""
        rc = p.returncode
    except subprocess.TimeoutExpired:
        where = threads_of(p.pid)
        held = holders(mnt)
        p.kill()
        p.wait()
        raise AssertionError("daemon did not exit after unmount; its "
                             "threads: %s; holders: %s" % (where, held))
    finally:
        if p.stdout:
            p.stdout.close()
        if p.stderr:
            p.stderr.close()
    assert rc == 0, "daemon exit status %d; its stderr ends: %s" % (
        rc, err[-4000:].decode(errors="replace"))
    assert not is_mount(mnt)


def _cleanup():
    for m in list(_mounts):
        try:
            unmount(m)
        except Exception:
            pass
    for p in _procs:
        if p.poll() is None:
            p.kill()
            p.wait()


atexit.register(_cleanup)
signal.signal(signal.SIGTERM, lambda *a: sys.exit(1))


def inspect_json(*args):
    """`stfs inspect --json ARGS...`, parsed; it must succeed."""
    r = subprocess.run([STFS, "inspect", "--json"] + list(args),
                       capture_output=True, timeout=120)
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout)


def expect_errno(path, errno_, within):
    """Reading path fails with errno_ in under `within` seconds."""
    t = time.time()
    try:
        with open(path, "rb") as f:
            f.read()
    except OSError as e:
        assert e.errno == errno_, e
    else:
        raise AssertionError("%s was read; want errno %d" % (path, errno_))
    el = time.time() - t
    assert el < within, "%s failed after %.1f s" % (path, el)
    return el


def bench_dirs(work):
    """A benchmark's folders under work: the mount point and a fresh
    world folder for its servers and sources, (mnt, world)."""
    mnt, world = os.path.join(work, "mnt"), os.path.join(work, "world")
    os.makedirs(mnt, exist_ok=True)
    shutil.rmtree(world, ignore_errors=True)
    os.makedirs(world)
    return mnt, world


def tmpdir():
    d = tempfile.mkdtemp(prefix="stfs-test-")
    return d


_for_others = []    # the copy of STFS other users run (made once per run)


def stfs_for_others():
    """The path of a copy of STFS that any user may run, in a fresh
    directory of its own (0755, removed at exit).  A test that runs stfs as
    another user (nobody) uses it: the build may sit in a directory only
    its owner may enter (a clone under a 0700 parent), where that user
    gets "Permission denied" before stfs even starts.  The program links
    libstfs statically, so the copy is the same program."""
    if not _for_others:
        src = shutil.which(STFS) or STFS
        d = tempfile.mkdtemp(prefix="stfs-bin-")
        atexit.register(shutil.rmtree, d, True)
        os.chmod(d, 0o755)
        dst = os.path.join(d, "stfs")
        shutil.copy(src, dst)
        os.chmod(dst, 0o755)
        _for_others.append(dst)
    return _for_others[0]


class Runner:
    """Runs test functions; prints one line each and a closing count."""

    def __init__(self):
        self.passed = 0
        self.failed = 0

    def run(self, fn, *args):
        name = fn.__name__ + ("(%s)" % ", ".join(map(str, args))
                              if args else "")
        t = time.time()
        try:
            fn(*args)
        except Exception as e:
            self.failed += 1
            print("FAIL %s: %s" % (name, e), flush=True)
            traceback.print_exc(file=sys.stdout)
        else:
            self.passed += 1
            print("ok   %s (%.2fs)" % (name, time.time() - t), flush=True)
        finally:
            _cleanup()

    def finish(self):
        print("%d passed, %d failed" % (self.passed, self.failed))
        return 1 if self.failed else 0


def wait_gone(mnt, timeout=10):
    """Wait for the daemons serving mnt to exit; True if they did."""
    end = time.time() + timeout
    while daemons_for(mnt):
        if time.time() > end:
            return False
        time.sleep(0.05)
    return True


def run_tests(tests):
    """The main of a test file: run each test function with the arguments
    it names, d (a fresh directory of its own) and/or mnt (the mount
    point); command-line arguments pick tests by name.  Returns the exit
    status; leaves nothing mounted and no directory behind."""
    require_fuse()
    r = Runner()
    base = tmpdir()
    mnt = os.path.join(base, "mnt")
    os.mkdir(mnt)
    only = sys.argv[1:]
    try:
        for fn in tests:
            if only and fn.__name__ not in only:
                continue
            d = os.path.join(base, fn.__name__)
            os.mkdir(d)
            code = fn.__code__
            args = [{"d": d, "mnt": mnt}[a]
                    for a in code.co_varnames[:code.co_argcount]]
            r.run(fn, *args)
            shutil.rmtree(d, ignore_errors=True)
    finally:
        unmount(mnt)
        os.chmod(base, 0o700)
        shutil.rmtree(base, ignore_errors=True)
    return r.finish()


def require_fuse():
    """Exit 77 (skip) without FUSE, but never skip under CI."""
    ok = os.path.exists("/dev/fuse") and os.access("/dev/fuse", os.R_OK | os.W_OK)
    if not ok:
        if os.environ.get("CI") == "true":
            print("FUSE is required under CI=true but /dev/fuse is "
                  "unusable")
            sys.exit(1)
        print("SKIP: /dev/fuse is not usable here")
        sys.exit(77)
