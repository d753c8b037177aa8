#!/bin/bash
# build.sh [BIN...]: the Kubernetes binaries of the cluster suite
# (tests/csi/test_cluster.py), built from the k8s.io/kubernetes module pinned by
# tests/csi/cluster/builder/go.mod and go.sum, into a cache outside the
# repository keyed by that version, so a machine builds them once:
#   ${STFS_CLUSTER_CACHE:-/var/cache/stfs-cluster}/<version>/<bin>
# Default BINs: kube-apiserver kube-controller-manager kubelet kubectl.
# Prints the cache directory on stdout and each build's time on stderr.
# Builds niced with one package at a time (-p 1): the machines this runs on
# are small and shared.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
mod=$here/builder
ver=$(sed -n 's/^require k8s.io\/kubernetes \(v[0-9.]*\)$/\1/p' "$mod/go.mod")
[ -n "$ver" ] || { echo "build.sh: no k8s.io/kubernetes version in $mod/go.mod" >&2; exit 1; }
out=${STFS_CLUSTER_CACHE:-/var/cache/stfs-cluster}/$ver
mkdir -p "$out"
bins=("$@")
[ ${#bins[@]} -gt 0 ] || bins=(kube-apiserver kube-controller-manager kubelet kubectl)
minor=${ver#v1.}; minor=${minor%%.*}
ld="-s -w"
for p in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
	ld="$ld -X $p.gitVersion=$ver -X $p.gitMajor=1 -X $p.gitMinor=$minor"
	ld="$ld -X $p.gitTreeState=clean"
done
for b in "${bins[@]}"; do
	[ -x "$out/$b" ] && continue
	t0=$(date +%s)
	(cd "$mod" && nice -n 19 go build -p 1 -trimpath -ldflags "$ld" \
		-o "$out/$b.tmp" "k8s.io/kubernetes/cmd/$b")
	mv "$out/$b.tmp" "$out/$b"
	echo "build.sh: $b $ver built in $(( $(date +%s) - t0 )) s" >&2
done
echo "$out"
