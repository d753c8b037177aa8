#!/usr/bin/env python3
"""test_credproc.py: a credential_process judged by its exit, against the
world of test_creds.py (its emulators and the tests' S3 server): a helper
that prints its keys and exits 0 but leaves a background child holding
its stdout gives its keys within a second of its exit (`stfs inspect` and
a mount that reads every tensor), and the child is ended with the
helper's process group (issue 47, item 5; before, the mount waited 30 s
and failed: "ran over 30 s; killed").
"""
import os
import sys
import threading
import time

TESTS_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path[:0] = [TESTS_DIR + "/fixtures", TESTS_DIR + "/servers"]
import stfstest as T  # noqa: E402
import credfix as C  # noqa: E402
from fixtures import env, read, slurp  # noqa: E402


def alive(pid):
    """Whether pid runs (a zombie or no process is not running)."""
    try:
        with open("/proc/%d/stat" % pid) as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def test_process_leaves_child(d, mnt):
    """A credential_process that prints its keys and exits 0 but leaves a
    background child holding its stdout: stfs takes the keys once the
    helper has exited (under 1 s, not the 30 s of its time bound) and the
    child is ended with the helper's process group."""
    w = C.world()
    k = w["iss"].issue("process")
    pidf, donef = os.path.join(d, "child"), os.path.join(d, "exited")
    script = C.write(os.path.join(d, "leaves.py"), (
        "#!/usr/bin/python3\nimport json, subprocess, sys, time\n"
        "c = subprocess.Popen(['sleep', '300'])\n"
        "open(%r, 'w').write(str(c.pid))\n"
        "print(json.dumps(%r))\nsys.stdout.flush()\n"
        "open(%r, 'w').write(repr(time.time()))\n")
        % (pidf, C.proc_keys(k), donef), 0o700)
    conf = C.write(os.path.join(d, "config"),
                 "[default]\ncredential_process = %s\n" % script)
    log = os.path.join(d, "log")
    with env(**C.base(d, AWS_CONFIG_FILE=conf)):
        # stfs inspect on a thread; here, when the child was ended
        out = []
        th = threading.Thread(target=lambda: out.append(C.stfs_inspect()))
        th.start()
        end = time.time() + 60
        while not (os.path.exists(donef) and os.path.getsize(donef)):
            assert time.time() < end and th.is_alive(), "no helper ran"
            time.sleep(0.01)
        child = int(read(pidf))
        while alive(child):
            assert time.time() < end, "the helper's child still runs"
            time.sleep(0.01)
        took = time.time() - float(read(donef))
        th.join(120)
        prov, key, used, r = out[0]
        assert r.returncode == 0, r.stderr
        assert key == k["AccessKeyId"] and used == {key}, (key, used)
        # stfs stopped waiting (and ended the group) within a second of
        # the helper's exit, not 30 s
        assert took < 1, "the child ended %.1f s after the helper" % took
        print("     keys taken, the child ended %.2f s after the helper "
              "exited" % took)
        # a mount takes them the same way and reads every tensor
        C.mount_reads_all(mnt, log)
        child2 = int(read(pidf))
        assert child2 != child
        end = time.time() + 30
        while alive(child2):
            assert time.time() < end, "the helper's child still runs"
            time.sleep(0.1)
    C.no_secret(r.stderr + r.stdout + slurp(log))


def run():
    try:
        C.world()
        return T.run_tests([test_process_leaves_child])
    finally:
        C.stop_world()


if __name__ == "__main__":
    sys.exit(run())
