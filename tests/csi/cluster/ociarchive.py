#!/usr/bin/env python3
"""ociarchive.py ROOTFS DEST NAME:TAG ENTRYPOINT_JSON: one OCI image
archive (an image layout of one layer, in a tar) from a directory tree, as
scripts/build-csi-image.sh makes the driver's: reproducible (sorted, owner
0, fixed times), the tag in index.json under both the OCI ref name and
containerd's image name, so `ctr -n k8s.io images import DEST` names it
NAME:TAG (NAME as a registry reference: registry.k8s.io/pause, ...)."""
import gzip
import hashlib
import io
import json
import os
import sys
import tarfile

EPOCH = int(os.environ.get("SOURCE_DATE_EPOCH", "1700000000"))


def layer(root):
    raw = io.BytesIO()
    with tarfile.open(fileobj=raw, mode="w", format=tarfile.PAX_FORMAT) as t:
        for top, dirs, files in os.walk(root):
            dirs.sort()
            for n in sorted(dirs + files):
                p = os.path.join(top, n)
                ti = t.gettarinfo(p, os.path.relpath(p, root))
                ti.uid = ti.gid = 0
                ti.uname = ti.gname = "root"
                ti.mtime = EPOCH
                if ti.isreg():
                    with open(p, "rb") as f:
                        t.addfile(ti, f)
                else:
                    t.addfile(ti)
    return raw.getvalue()


def archive(root, dest, ref, entrypoint):
    name, tag = ref.rsplit(":", 1)
    data = layer(root)
    gz = io.BytesIO()
    with gzip.GzipFile(fileobj=gz, mode="wb", mtime=0, compresslevel=1) as g:
        g.write(data)
    gz = gz.getvalue()
    blobs = {}

    def blob(b, media):
        d = "sha256:" + hashlib.sha256(b).hexdigest()
        blobs[d] = b
        return {"digest": d, "size": len(b), "mediaType": media}
    config = json.dumps({
        "architecture": "amd64", "os": "linux",
        "created": "2023-11-14T22:13:20Z",
        "config": {"Entrypoint": entrypoint,
                   "Env": ["PATH=/usr/sbin:/usr/bin:/sbin:/bin"]},
        "rootfs": {"type": "layers", "diff_ids": [
            "sha256:" + hashlib.sha256(data).hexdigest()]},
    }, sort_keys=True).encode()
    manifest = json.dumps({
        "schemaVersion": 2,
        "mediaType": "application/vnd.oci.image.manifest.v1+json",
        "config": blob(config, "application/vnd.oci.image.config.v1+json"),
        "layers": [blob(gz, "application/vnd.oci.image.layer.v1.tar+gzip")],
    }, sort_keys=True).encode()
    m = blob(manifest, "application/vnd.oci.image.manifest.v1+json")
    m["annotations"] = {"org.opencontainers.image.ref.name": tag,
                        "io.containerd.image.name": ref}
    index = json.dumps({
        "schemaVersion": 2,
        "mediaType": "application/vnd.oci.image.index.v1+json",
        "manifests": [m]}, sort_keys=True).encode()
    with tarfile.open(dest + ".tmp", "w", format=tarfile.PAX_FORMAT) as t:
        def add(n, b):
            ti = tarfile.TarInfo(n)
            ti.size, ti.mtime, ti.mode = len(b), EPOCH, 0o644
            t.addfile(ti, io.BytesIO(b))
        add("oci-layout", b'{"imageLayoutVersion": "1.0.0"}')
        add("index.json", index)
        for d, b in sorted(blobs.items()):
            add("blobs/sha256/" + d.split(":")[1], b)
    os.rename(dest + ".tmp", dest)


if __name__ == "__main__":
    if len(sys.argv) != 5:
        sys.exit(__doc__)
    archive(sys.argv[1], sys.argv[2], sys.argv[3], json.loads(sys.argv[4]))
