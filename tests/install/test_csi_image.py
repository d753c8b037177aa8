#!/usr/bin/env python3
"""test_csi_image.py: the driver's OCI image (scripts/build-csi-image.sh)
run under Debian's runc, as the DaemonSet's `daemons` container runs it.

The image is built (from the project's .deb, built here too: minutes,
which is why this is in the `install` suite beside the package tests, or
taken from STFS_CSI_IMAGE=OUTDIR of an earlier build), its OCI archive
unpacked by the layout's own index, manifest and layer digests, and its
`stfs-csi daemon` started by runc as nobody with no capability,
no_new_privs and a read-only root, the launcher's directory, the node
cache and the model bound in.  The plugin runs on the host (as the
DaemonSet's privileged container would) and publishes a local model:

- the pod (its own mount namespace, slave) reads every tensor and %repo/
  file equal to the source, through the image's stfs;
- that stfs runs as nobody with CapEff 0, and its argv[0] is the image's;
- a second publish starts no second daemon; kill -9 of the daemon: the
  pod reads again within 5 s (a new stfs in the container);
- the last unpublish unmounts it after the grace time.
"""
import gzip
import hashlib
import io
import json
import os
import shutil
import signal
import subprocess
import sys
import tarfile
import time

TESTS_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path[:0] = [TESTS_DIR + "/fixtures", TESTS_DIR + "/servers"]
import stfstest as T  # noqa: E402
from csifix import (NOBODY, Node, mounts_under, pod_read, status,  # noqa
                    wait_dead)

ROOT = os.path.join(TESTS_DIR, "..")


def image(d):
    """The OCI archive: STFS_CSI_IMAGE's, or built now."""
    out = os.environ.get("STFS_CSI_IMAGE")
    if not out:
        out = os.path.join(d, "image")
        r = subprocess.run(["bash", os.path.join(ROOT, "scripts",
                                                 "build-csi-image.sh"), out],
                           capture_output=True, timeout=1800)
        assert r.returncode == 0, r.stderr.decode()[-3000:]
    return os.path.join(out, "stfs-csi.oci.tar")


def unpack(archive, rootfs):
    """The image's one layer into rootfs, found by index.json and the
    manifest, every blob checked against its digest."""
    with tarfile.open(archive) as t:
        files = {m.name: t.extractfile(m).read() for m in t.getmembers()
                 if m.isfile()}
    assert json.loads(files["oci-layout"])["imageLayoutVersion"] == "1.0.0"

    def blob(desc):
        data = files["blobs/sha256/" + desc["digest"].split(":")[1]]
        assert "sha256:" + hashlib.sha256(data).hexdigest() == \
            desc["digest"] and len(data) == desc["size"], desc
        return data
    index = json.loads(files["index.json"])
    (m,) = index["manifests"]
    assert m["annotations"]["org.opencontainers.image.ref.name"] == "0.2.0"
    manifest = json.loads(blob(m))
    config = json.loads(blob(manifest["config"]))
    assert config["config"]["Entrypoint"] == ["/usr/bin/stfs-csi"]
    (layer,) = manifest["layers"]
    raw = gzip.decompress(blob(layer))
    assert "sha256:" + hashlib.sha256(raw).hexdigest() == \
        config["rootfs"]["diff_ids"][0]
    os.makedirs(rootfs)
    with tarfile.open(fileobj=io.BytesIO(raw)) as t:
        if hasattr(tarfile, "tar_filter"):
            t.extractall(rootfs, filter="tar")
        else:
            # Debian 12's Python 3.11.2 predates extraction filters: the
            # same refusals by hand (no absolute path, no '..', no device)
            for m in t.getmembers():
                parts = m.name.split("/")
                assert not m.name.startswith("/") and ".." not in parts, \
                    m.name
                assert not (m.ischr() or m.isblk()), m.name
                if m.islnk():
                    assert not m.linkname.startswith("/") and \
                        ".." not in m.linkname.split("/"), m.linkname
            t.extractall(rootfs)


def bundle(d, rootfs_archive, binds):
    """A runc bundle of the image: `stfs-csi daemon` as nobody, no
    capability, no_new_privs, read-only root, binds (host path, rw)."""
    b = os.path.join(d, "bundle")
    os.makedirs(b)
    unpack(rootfs_archive, os.path.join(b, "rootfs"))
    subprocess.run(["runc", "spec"], cwd=b, check=True)
    with open(os.path.join(b, "config.json")) as f:
        spec = json.load(f)
    p = spec["process"]
    p["terminal"] = False
    p["user"] = {"uid": NOBODY, "gid": NOBODY}
    p["args"] = ["/usr/bin/stfs-csi", "daemon", "--socket",
                 "/run/stfs-csi/launcher.sock", "--stfs", "/usr/bin/stfs"]
    p["capabilities"] = {k: [] for k in ("bounding", "effective",
                                          "permitted", "ambient")}
    p["noNewPrivileges"] = True
    spec["root"] = {"path": "rootfs", "readonly": True}
    spec["hostname"] = "stfs-daemons"
    for src, dst, rw in binds:
        spec["mounts"].append({"destination": dst, "type": "bind",
                               "source": src,
                               "options": ["rbind", "rw" if rw else "ro"]})
    with open(os.path.join(b, "config.json"), "w") as f:
        json.dump(spec, f)
    return b


def model(d):
    src = os.path.join(d, "model")
    os.makedirs(src)
    os.chmod(src, 0o755)
    tensors = [("model.layers.%d.w" % i, "F32", [64, 64],
                os.urandom(64 * 64 * 4)) for i in range(3)]
    T.write_st(os.path.join(src, "model.safetensors"), tensors)
    with open(os.path.join(src, "config.json"), "w") as f:
        json.dump({"model_type": "llama"}, f)
    want = {n.replace(".", "/"): hashlib.sha256(data).hexdigest()
            for n, _, _, data in tensors}
    for n in os.listdir(src):
        os.chmod(os.path.join(src, n), 0o644)
        with open(os.path.join(src, n), "rb") as f:
            want["%repo/" + n] = hashlib.sha256(f.read()).hexdigest()
    return src, want


def test_image_under_runc(d):
    os.chmod(os.path.dirname(d), 0o711)
    os.chmod(d, 0o755)
    archive = image(d)
    src, want = model(d)
    nd = os.path.join(d, "node")
    cid = "stfs-csi-test-%d" % os.getpid()

    def launcher(sock):
        b = bundle(d, archive, [(os.path.dirname(sock), "/run/stfs-csi",
                                 True),
                                (os.path.join(nd, "cache"),
                                 os.path.join(nd, "cache"), True),
                                (src, src, False)])
        return ["runc", "run", "--bundle", b, cid]
    os.makedirs(os.path.join(nd, "cache"))
    try:
        with Node(nd, grace="1s", launcher=launcher,
                  stfs_argv0="/usr/bin/stfs", local_dir=src) as node:
            assert node.publish("pod-a", {"source": src})["code"] == "OK"
            pids = node.daemons()
            assert len(pids) == 1, pids
            st = status(pids[0])
            assert st["Uid"] == [str(NOBODY)] * 4, st["Uid"]
            assert int(st["CapEff"][0], 16) == 0
            assert int(st["CapBnd"][0], 16) == 0
            assert st["NoNewPrivs"] == ["1"]
            # in the container's own mount namespace
            assert os.readlink("/proc/%d/ns/mnt" % pids[0]) != \
                os.readlink("/proc/self/ns/mnt")
            assert pod_read(node.target("pod-a"), list(want)) == want
            assert node.publish("pod-b", {"source": src},
                                vid="v2")["code"] == "OK"
            assert node.daemons() == pids
            t = time.time()
            os.kill(pids[0], signal.SIGKILL)
            wait_dead(pids[0])
            while time.time() < t + 5:
                new = node.daemons()
                if new and new != pids:
                    break
                time.sleep(0.02)
            assert pod_read(node.target("pod-a"), list(want)) == want
            print("   recovery under runc: %.2f s" % (time.time() - t))
            assert node.daemons() != pids
            for pod, vid in (("pod-a", "vol-1"), ("pod-b", "v2")):
                assert node.unpublish(pod, vid)["code"] == "OK"
            end = time.time() + 10
            while node.daemons() and time.time() < end:
                time.sleep(0.05)
            assert not node.daemons() and not mounts_under(node.state)
    finally:
        subprocess.run(["runc", "kill", cid, "KILL"], capture_output=True)
        subprocess.run(["runc", "delete", "-f", cid], capture_output=True)


if __name__ == "__main__":
    if os.geteuid() != 0:
        print("SKIP: runc and mounts: root only")
        sys.exit(1 if os.environ.get("CI") == "true" else 77)
    if not shutil.which("runc"):
        print("runc is missing: scripts/deps.sh installs it")
        sys.exit(1)
    sys.exit(T.run_tests([test_image_under_runc]))
