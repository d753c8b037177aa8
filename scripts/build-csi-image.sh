#!/bin/bash
# build-csi-image.sh [OUTDIR]: the Kubernetes driver's OCI image,
# stfs-csi:VERSION, from Debian's packages and the project's own .deb,
# with nothing pulled from a registry (docs/kubernetes.md, "The image").
#
# - stfs: the project's .deb (scripts/build-deb.sh, or STFS_DEB=PATH);
# - stfs-csi: `go build` of csi/ (static, offline: the modules deps.sh
#   fetched);
# - under them, the Debian packages stfs's .deb depends on, recursively
#   (no recommends), and ca-certificates: fetched with `apt-get download`
#   from the machine's own apt sources and unpacked (no maintainer script
#   runs; the CA bundle is made as update-ca-certificates makes it);
# - /etc/passwd and /etc/group with root and nobody (65534), the
#   library cache (ldconfig -r), an empty /tmp.
#
# Out: OUTDIR/stfs-csi.oci.tar (an OCI image layout, one layer, the tag
# VERSION in index.json, which `ctr images import`, `skopeo copy
# oci-archive:` and `podman load` read) and OUTDIR/rootfs (the same tree,
# which tests/install/test_csi_image.py runs under runc).  Default OUTDIR:
# build-csi/.  Minutes, most of them building the .deb.
set -euo pipefail
cd "$(dirname "$0")/.."
ver=$(sed -nE "s/^ *version: .([0-9.]+).,/\1/p" meson.build | head -1)
out=$(realpath -m "${1:-build-csi}")
work="$out/work"
rm -rf "$work" "$out/rootfs" "$out/stfs-csi.oci.tar"
mkdir -p "$work/debs" "$out/rootfs"
root="$out/rootfs"
go=$(command -v go || echo /usr/local/go/bin/go)

# the project's own package
deb=${STFS_DEB:-}
if [ -z "$deb" ]; then
	bash scripts/build-deb.sh "$work/stfs-debs" >/dev/null
	deb=$(ls "$work"/stfs-debs/stfs_*.deb)
fi

# the driver, static
(cd csi && CGO_ENABLED=0 GOFLAGS=-mod=readonly GOTOOLCHAIN=local \
	"$go" build -trimpath -ldflags "-s -w -X main.version=$ver" \
	-o "$work/stfs-csi" ./cmd/stfs-csi)

# Debian's packages under stfs: its Depends, recursively
direct=$(dpkg-deb -f "$deb" Depends | tr ',' '\n' |
	sed -E 's/\(.*\)//; s/\|.*//; s/^ +//; s/ +$//' | grep -v '^$')
pkgs=$(apt-cache depends --recurse --no-recommends --no-suggests \
	--no-conflicts --no-breaks --no-replaces --no-enhances \
	$direct ca-certificates | grep -E '^[a-z0-9]' | sort -u)
(cd "$work/debs" && { apt-get download $pkgs >/dev/null 2>&1 || {
	apt-get update -qq && apt-get download $pkgs >/dev/null; }; })

# one tree: merged /usr as Debian 12 has it, every package unpacked
for d in bin sbin lib lib64; do
	mkdir -p "$root/usr/$d"
	ln -s "usr/$d" "$root/$d"
done
for p in "$work"/debs/*.deb "$deb"; do
	dpkg-deb --fsys-tarfile "$p" |
		tar -x --keep-directory-symlink -C "$root"
done
install -m 0755 "$work/stfs-csi" "$root/usr/bin/stfs-csi"
mkdir -p "$root/etc/ssl/certs" "$root/tmp" "$root/run" "$root/var/cache/stfs-csi"
chmod 1777 "$root/tmp"
find "$root/usr/share/ca-certificates" -name '*.crt' | sort |
	xargs cat >"$root/etc/ssl/certs/ca-certificates.crt"
printf 'root:x:0:0:root:/root:/usr/sbin/nologin\nnobody:x:65534:65534:nobody:/nonexistent:/usr/sbin/nologin\n' \
	>"$root/etc/passwd"
printf 'root:x:0:\nnogroup:x:65534:\n' >"$root/etc/group"
ldconfig -r "$root"
# what the image does not need at run time
rm -rf "$root/usr/share/doc" "$root/usr/share/man" "$root/usr/share/info" \
	"$root/usr/share/locale" "$root/usr/share/lintian"

# the OCI image layout: one layer, reproducible (sorted, owner 0, fixed
# times), then one archive of the layout
/usr/bin/python3 - "$root" "$out/stfs-csi.oci.tar" "$ver" <<'EOF'
import gzip, hashlib, io, json, os, sys, tarfile
root, dest, ver = sys.argv[1:]
EPOCH = int(os.environ.get("SOURCE_DATE_EPOCH", "1700000000"))
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
layer = raw.getvalue()
gz = io.BytesIO()
with gzip.GzipFile(fileobj=gz, mode="wb", mtime=0) as g:
    g.write(layer)
gz = gz.getvalue()
blobs = {}
def blob(data):
    d = "sha256:" + hashlib.sha256(data).hexdigest()
    blobs[d] = data
    return {"digest": d, "size": len(data)}
config = json.dumps({
    "architecture": "amd64", "os": "linux",
    "created": "2023-11-14T22:13:20Z",
    "config": {"Entrypoint": ["/usr/bin/stfs-csi"],
               "Env": ["PATH=/usr/sbin:/usr/bin:/sbin:/bin"],
               "Labels": {"org.opencontainers.image.title": "stfs-csi",
                          "org.opencontainers.image.version": ver}},
    "rootfs": {"type": "layers", "diff_ids": [
        "sha256:" + hashlib.sha256(layer).hexdigest()]},
}, sort_keys=True).encode()
manifest = json.dumps({
    "schemaVersion": 2,
    "mediaType": "application/vnd.oci.image.manifest.v1+json",
    "config": dict(blob(config),
                   mediaType="application/vnd.oci.image.config.v1+json"),
    "layers": [dict(blob(gz), mediaType=
                    "application/vnd.oci.image.layer.v1.tar+gzip")],
}, sort_keys=True).encode()
index = json.dumps({
    "schemaVersion": 2,
    "mediaType": "application/vnd.oci.image.index.v1+json",
    "manifests": [dict(blob(manifest), mediaType=
                       "application/vnd.oci.image.manifest.v1+json",
                       annotations={
                           "org.opencontainers.image.ref.name": ver,
                           "io.containerd.image.name":
                               "docker.io/library/stfs-csi:" + ver})],
}, sort_keys=True).encode()
with tarfile.open(dest, "w", format=tarfile.PAX_FORMAT) as t:
    def add(name, data):
        ti = tarfile.TarInfo(name)
        ti.size, ti.mtime, ti.mode = len(data), EPOCH, 0o644
        t.addfile(ti, io.BytesIO(data))
    add("oci-layout", b'{"imageLayoutVersion": "1.0.0"}')
    add("index.json", index)
    for d, data in sorted(blobs.items()):
        add("blobs/sha256/" + d.split(":")[1], data)
print("%s: stfs-csi:%s, %.1f MB (layer %.1f MB unpacked)" % (
    dest, ver, os.path.getsize(dest) / 1e6, len(layer) / 1e6))
EOF
rm -rf "$work"
