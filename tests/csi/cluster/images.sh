#!/bin/bash
# images.sh: the cluster suite's images other than the driver's, as OCI
# archives built here from Debian's packages and the project's pinned
# wheels (no registry is reached), cached beside the binaries:
#   ${STFS_CLUSTER_CACHE:-/var/cache/stfs-cluster}/images/NAME.oci.tar
# - pause.oci.tar: stfs.test/pause:1, tests/csi/cluster/pause.c (static), the
#   sandbox image containerd is configured with;
# - workload.oci.tar: stfs.test/workload:1, Debian's python3 and
#   python3-numpy (their Depends, recursively, unpacked as
#   scripts/build-csi-image.sh unpacks the driver's) and safetensors, the
#   wheel tests/loaders/py-loaders/requirements.txt pins (hash-checked).
# (deploy/kubernetes/node.yaml has no sidecar: the driver's image is the
# only other one, from scripts/build-csi-image.sh.)
# Prints the images folder; each image's time on stderr.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
cache=${STFS_CLUSTER_CACHE:-/var/cache/stfs-cluster}
out=$cache/images
mkdir -p "$out"
oci=$here/ociarchive.py

skel() {    # ROOT: merged /usr, /tmp, passwd and group
	local d
	for d in bin sbin lib lib64; do
		mkdir -p "$1/usr/$d"
		ln -sfn "usr/$d" "$1/$d"
	done
	mkdir -p "$1/tmp" "$1/etc" "$1/dev" "$1/proc" "$1/sys" "$1/run"
	chmod 1777 "$1/tmp"
	printf 'root:x:0:0:root:/root:/usr/sbin/nologin\nnobody:x:65534:65534:nobody:/nonexistent:/usr/sbin/nologin\n' >"$1/etc/passwd"
	printf 'root:x:0:\nnogroup:x:65534:\n' >"$1/etc/group"
}

image() {   # NAME REF ENTRYPOINT_JSON BUILDER
	local t0 work
	[ -s "$out/$1.oci.tar" ] && return 0
	t0=$(date +%s)
	work=$(mktemp -d)
	skel "$work/root"
	"$4" "$work"
	python3 "$oci" "$work/root" "$out/$1.oci.tar" "$2" "$3"
	rm -rf "$work"
	echo "images.sh: $2 in $(( $(date +%s) - t0 )) s," \
		"$(( $(stat -c %s "$out/$1.oci.tar") / 1000000 )) MB" >&2
}

pause_root() {
	nice -n 19 gcc -static -O2 -o "$1/root/pause" "$here/pause.c"
}

workload_root() {
	local pkgs
	mkdir -p "$1/debs" "$1/wheel"
	pkgs=$(apt-cache depends --recurse --no-recommends --no-suggests \
		--no-conflicts --no-breaks --no-replaces --no-enhances \
		python3 python3-numpy | grep -E '^[a-z0-9]' | sort -u)
	(cd "$1/debs" && { apt-get download $pkgs >/dev/null 2>&1 || {
		apt-get update -qq && apt-get download $pkgs >/dev/null; }; })
	for p in "$1"/debs/*.deb; do
		dpkg-deb --fsys-tarfile "$p" |
			tar -x --keep-directory-symlink -C "$1/root"
	done
	# what update-alternatives would have made (no maintainer script runs)
	local lib=$1/root/usr/lib/x86_64-linux-gnu
	ln -sfn blas/libblas.so.3 "$lib/libblas.so.3"
	ln -sfn lapack/liblapack.so.3 "$lib/liblapack.so.3"
	grep -A1 '^safetensors==' "$here/../py-loaders/requirements.txt" \
		>"$1/req.txt"
	python3 -m pip download -q --no-deps --require-hashes \
		--only-binary=:all: --platform manylinux2014_x86_64 \
		--python-version 3.11 -r "$1/req.txt" -d "$1/wheel"
	python3 -m zipfile -e "$1"/wheel/safetensors-*.whl \
		"$1/root/usr/lib/python3/dist-packages/"
	ldconfig -r "$1/root"
	rm -rf "$1/root/usr/share/doc" "$1/root/usr/share/man" \
		"$1/root/usr/share/locale"
}

image pause stfs.test/pause:1 '["/pause"]' pause_root
image workload stfs.test/workload:1 '["/usr/bin/python3"]' workload_root
echo "$out"
