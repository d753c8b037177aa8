#!/usr/bin/env python3
"""test_fdmount.py: `stfs mount -f SOURCE /dev/fd/N`, the form a
privileged mounter (the Kubernetes driver, csi/) hands to an unprivileged
daemon.

This test is the privileged side: it opens /dev/fuse, mounts it itself
with mount(2) (fd=N, allow_other, the daemon's user), and starts stfs as
nobody with no capability, N inherited.  Through the kernel:

- every tensor reads back equal to the source, for root and for another
  user, and the mount is what the mounter made (ro, fuse.stfs);
- the daemon runs as nobody with CapEff 0;
- the mounter's umount(2) ends the daemon, exit 0; a daemon killed first
  leaves a dead mount (ENOTCONN) that the mounter unmounts;
- a number that is not open, or open on something other than /dev/fuse,
  is a clear error, exit 1, before the source is read; readahead= is said
  to be the mounter's;
- STFS_CONFINE=1 (what the CSI launcher sets), with a descriptor the
  daemon's starter left open: started as root, and as nobody with an
  empty bounding set, the daemon has NoNewPrivs 1, every capability set 0
  and only 0-2 and N open before it opens anything (never the inherited
  one), and serves; as nobody with a full bounding set (which it cannot
  empty) it refuses, exit 1, saying why, before it reads the source.
"""
import ctypes
import errno
import os
import signal
import subprocess
import sys

TESTS_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path[:0] = [TESTS_DIR + "/fixtures", TESTS_DIR + "/servers"]
import stfstest as T  # noqa: E402

NOBODY = 65534
MS_RDONLY, MS_NOSUID, MS_NODEV = 1, 2, 4
MNT_DETACH = 2
libc = ctypes.CDLL(None, use_errno=True)


def fuse_mount(mnt, uid=NOBODY, gid=NOBODY):
    """Open /dev/fuse and mount it on mnt as the driver does: the fd."""
    fd = os.open("/dev/fuse", os.O_RDWR | os.O_CLOEXEC)
    data = ("fd=%d,rootmode=40000,user_id=%d,group_id=%d,allow_other,"
            "default_permissions" % (fd, uid, gid)).encode()
    if libc.mount(b"fdtest", mnt.encode(), b"fuse.stfs",
                  MS_RDONLY | MS_NOSUID | MS_NODEV, data) != 0:
        e = ctypes.get_errno()
        os.close(fd)
        raise OSError(e, "mount: " + os.strerror(e))
    T._mounts.append(mnt)
    return fd


def umount(mnt, flags=0):
    if libc.umount2(mnt.encode(), flags) != 0:
        e = ctypes.get_errno()
        raise OSError(e, "umount: " + os.strerror(e))
    if mnt in T._mounts:
        T._mounts.remove(mnt)


def serve(src, fd, *opts, user=NOBODY):
    """stfs as user, on /dev/fd/N, N the same number in the child."""
    p = subprocess.Popen([T.stfs_for_others(), "mount", "-f"] + list(opts) +
                         [src, "/dev/fd/%d" % fd], pass_fds=(fd,),
                         user=user, group=user, extra_groups=[],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    T._procs.append(p)
    return p


def status(pid):
    out = {}
    with open("/proc/%d/status" % pid) as f:
        for line in f:
            k, _, v = line.partition(":")
            out[k] = v.split()
    return out


def fixture(d):
    """A source that nobody may read, and its tensors."""
    os.chmod(os.path.dirname(d), 0o711)
    os.chmod(d, 0o755)
    tensors = [("model.layers.%d.w" % i, "F32", [64, 16],
                os.urandom(64 * 16 * 4)) for i in range(3)]
    tensors.append(("model.norm", "BF16", [7], os.urandom(14)))
    src = T.write_st(os.path.join(d, "m.safetensors"), tensors)
    os.chmod(src, 0o644)
    return src, tensors


def wait_served(mnt, p, timeout=20):
    """The daemon has answered INIT: a lookup of the root succeeds."""
    import time
    end = time.time() + timeout
    while time.time() < end:
        try:
            os.listdir(mnt)
            return
        except OSError:
            pass
        if p.poll() is not None:
            raise AssertionError("stfs exited %d: %s" %
                                 (p.returncode, p.stderr.read().decode()))
        time.sleep(0.01)
    raise AssertionError("no answer on %s" % mnt)


def test_serves_as_nobody(d, mnt):
    src, tensors = fixture(d)
    fd = fuse_mount(mnt)
    p = serve(src, fd)
    os.close(fd)        # the daemon holds the only descriptor now
    wait_served(mnt, p)
    st = status(p.pid)
    assert st["Uid"] == [str(NOBODY)] * 4, st["Uid"]
    assert st["Gid"] == [str(NOBODY)] * 4, st["Gid"]
    assert int(st["CapEff"][0], 16) == 0 and int(st["CapPrm"][0], 16) == 0
    for name, _, _, data in tensors:
        path = os.path.join(mnt, name.replace(".", "/"))
        with open(path, "rb") as f:
            assert f.read() == data, name
    # another user reads too: the mounter's allow_other
    r = subprocess.run(["cat", os.path.join(mnt, "model/norm")],
                       user=1234, group=1234, extra_groups=[],
                       capture_output=True, timeout=20)
    assert r.returncode == 0 and r.stdout == tensors[-1][3], r.stderr
    line = [m for m in open("/proc/self/mountinfo")
            if m.split()[4] == os.path.realpath(mnt)][0]
    assert " fuse.stfs " in line and " ro," in line + ",", line
    # the mounter unmounts: the daemon ends by itself, exit 0
    umount(mnt)
    assert p.wait(timeout=20) == 0, p.stderr.read()
    p.stderr.close()
    p.stdout.close()


def test_killed_leaves_dead_mount(d, mnt):
    src, tensors = fixture(d)
    fd = fuse_mount(mnt)
    p = serve(src, fd)
    os.close(fd)
    wait_served(mnt, p)
    p.send_signal(signal.SIGKILL)
    p.wait()
    try:
        os.stat(os.path.join(mnt, "model"))
    except OSError as e:
        assert e.errno == errno.ENOTCONN, e
    else:
        raise AssertionError("a dead daemon's mount answered")
    umount(mnt)
    assert not T.is_mount(mnt)
    # mounted again on the same directory, a new daemon serves it
    fd = fuse_mount(mnt)
    p = serve(src, fd)
    os.close(fd)
    wait_served(mnt, p)
    with open(os.path.join(mnt, "model/norm"), "rb") as f:
        assert f.read() == tensors[-1][3]
    umount(mnt)
    assert p.wait(timeout=20) == 0


def test_sigterm_leaves_mount_to_mounter(d, mnt):
    src, _ = fixture(d)
    fd = fuse_mount(mnt)
    p = serve(src, fd)
    os.close(fd)
    wait_served(mnt, p)
    p.send_signal(signal.SIGTERM)
    assert p.wait(timeout=20) == 0, p.stderr.read()
    # stfs cannot unmount what it did not mount: the mounter does
    assert T.is_mount(mnt)
    umount(mnt)


def test_bad_descriptors(d, mnt):
    src, _ = fixture(d)
    # not open
    r = subprocess.run([T.STFS, "mount", "-f", src, "/dev/fd/987"],
                       capture_output=True, timeout=20)
    assert r.returncode == 1, r
    assert b"mountpoint /dev/fd/987: Bad file descriptor" in r.stderr, r
    # open, but a regular file
    with open(src, "rb") as f:
        r = subprocess.run([T.STFS, "mount", "-f", src,
                            "/dev/fd/%d" % f.fileno()], pass_fds=(f.fileno(),),
                           capture_output=True, timeout=20)
    assert r.returncode == 1, r
    assert b"is not /dev/fuse" in r.stderr, r
    # /dev/fd/ with no number is a path like any other
    r = subprocess.run([T.STFS, "mount", "-f", src, "/dev/fd/x1"],
                       capture_output=True, timeout=20)
    assert r.returncode == 1 and b"mountpoint /dev/fd/x1:" in r.stderr, r
    # an unmounted /dev/fuse: stfs waits for INIT, which comes with the
    # mount; readahead= is the mounter's, said once
    fd = fuse_mount(mnt)
    p = serve(src, fd, "-o", "readahead=4096")
    os.close(fd)
    wait_served(mnt, p)
    umount(mnt)
    assert p.wait(timeout=20) == 0
    err = p.stderr.read().decode()
    assert "readahead=4096: on /dev/fd/" in err and "mounter sets it" in err, \
        err


def test_confined(d, mnt):
    src, tensors = fixture(d)
    marker = os.path.join(d, "left-open-by-the-starter")
    with open(marker, "w") as f:
        f.write("x")
    extra = os.open(marker, os.O_RDONLY)
    env = dict(os.environ, STFS_CONFINE="1")
    nobody = ["setpriv", "--reuid=%d" % NOBODY, "--regid=%d" % NOBODY,
              "--clear-groups", "--inh-caps=-all"]
    try:
        for who, pre in (("root", []),
                         ("nobody, no bounding set",
                          nobody + ["--bounding-set=-all"])):
            fd = fuse_mount(mnt)
            p = subprocess.Popen(
                pre + [T.stfs_for_others(), "mount", "-f", src,
                       "/dev/fd/%d" % fd], pass_fds=(fd, extra), env=env,
                stdout=subprocess.PIPE, stderr=subprocess.PIPE)
            T._procs.append(p)
            os.close(fd)
            wait_served(mnt, p)
            st = status(p.pid)
            caps = {k: st[k][0] for k in ("CapInh", "CapPrm", "CapEff",
                                          "CapBnd", "CapAmb")}
            assert st["NoNewPrivs"] == ["1"], (who, st["NoNewPrivs"])
            assert not any(int(v, 16) for v in caps.values()), (who, caps)
            fds = {int(n): os.readlink("/proc/%d/fd/%s" % (p.pid, n))
                   for n in os.listdir("/proc/%d/fd" % p.pid)}
            assert marker not in fds.values(), (who, fds)
            assert fds[fd] == "/dev/fuse", (who, fds)
            with open(os.path.join(mnt, "model/norm"), "rb") as f:
                assert f.read() == tensors[-1][3], who
            umount(mnt)
            assert p.wait(timeout=20) == 0, (who, p.stderr.read())
            p.stdout.close()
            p.stderr.close()
        # nobody with the whole bounding set: it cannot empty it
        fd = fuse_mount(mnt)
        r = subprocess.run(nobody + [T.stfs_for_others(), "mount", "-f",
                                     src, "/dev/fd/%d" % fd],
                           pass_fds=(fd, extra), env=env,
                           capture_output=True, timeout=20)
        os.close(fd)
        umount(mnt, MNT_DETACH)
        assert r.returncode == 1, r
        assert b"STFS_CONFINE: the bounding set holds capability" in \
            r.stderr, r.stderr
    finally:
        os.close(extra)


if __name__ == "__main__":
    if os.geteuid() != 0:
        print("SKIP: mount(2) of /dev/fuse needs root")
        sys.exit(1 if os.environ.get("CI") == "true" else 77)
    sys.exit(T.run_tests([test_serves_as_nobody, test_killed_leaves_dead_mount,
                          test_sigterm_leaves_mount_to_mounter,
                          test_bad_descriptors, test_confined]))
