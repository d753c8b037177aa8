#!/bin/bash
# build.sh [BIN...]: the Kubernetes binaries of the cluster suite
# (tests/csi/test_cluster.py), built from the k8s.io/kubernetes module pinned by
# tests/csi/cluster/builder/go.mod and go.sum, into a cache outside the
# repository keyed by that version, so a machine builds them once:
#   ${STFS_CLUSTER_CACHE:-/var/cache/stfs-cluster}/<version>/<bin>
# Default BINs: kube-apiserver kube-controller-manager kube-scheduler
# kubelet kubectl.  Prints the cache directory on stdout and the build's
# time on stderr.  All missing BINs are built by one `go build` (their
# shared packages compiled once), niced, with STFS_CLUSTER_JOBS packages at
# a time (default 2: the machines this runs on are small and shared).
# One build at a time per cache: a second build.sh (the cluster suite's,
# while scripts/run-tests.sh's background one runs) waits for the first
# (flock) and then finds the binaries built.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
mod=$here/builder
ver=$(sed -n 's/^require k8s.io\/kubernetes \(v[0-9.]*\)$/\1/p' "$mod/go.mod")
[ -n "$ver" ] || { echo "build.sh: no k8s.io/kubernetes version in $mod/go.mod" >&2; exit 1; }
out=${STFS_CLUSTER_CACHE:-/var/cache/stfs-cluster}/$ver
mkdir -p "$out"
bins=("$@")
[ ${#bins[@]} -gt 0 ] ||
	bins=(kube-apiserver kube-controller-manager kube-scheduler kubelet kubectl)
exec 9>"$out/.build.lock"
if ! flock -n 9; then
	t0=$(date +%s)
	echo "build.sh: another build of $out is under way: waiting" >&2
	flock 9
	echo "build.sh: waited $(( $(date +%s) - t0 )) s for it" >&2
fi
pkgs=()
for b in "${bins[@]}"; do
	[ -x "$out/$b" ] || pkgs+=("k8s.io/kubernetes/cmd/$b")
done
if [ ${#pkgs[@]} -gt 0 ]; then
	minor=${ver#v1.}; minor=${minor%%.*}
	ld="-s -w"
	for p in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
		ld="$ld -X $p.gitVersion=$ver -X $p.gitMajor=1 -X $p.gitMinor=$minor"
		ld="$ld -X $p.gitTreeState=clean"
	done
	t0=$(date +%s)
	tmp=$(mktemp -d "$out/.build.XXXXXX")
	trap 'rm -rf "$tmp"' EXIT
	(cd "$mod" && GOFLAGS=-mod=readonly nice -n 19 go build \
		-p "${STFS_CLUSTER_JOBS:-2}" -trimpath -ldflags "$ld" \
		-o "$tmp/" "${pkgs[@]}")
	for p in "${pkgs[@]}"; do
		mv "$tmp/${p##*/}" "$out/${p##*/}"
	done
	echo "build.sh: ${pkgs[*]##*/} $ver built in" \
		"$(( $(date +%s) - t0 )) s (-p ${STFS_CLUSTER_JOBS:-2})" >&2
fi
echo "$out"
