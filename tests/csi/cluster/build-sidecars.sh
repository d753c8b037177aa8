#!/bin/bash
# build-sidecars.sh REGISTRAR_GIT LIVENESSPROBE_GIT: the two sidecars that
# deploy/kubernetes/node.yaml names (registry.k8s.io/sig-storage/
# csi-node-driver-registrar:v2.13.0 and livenessprobe:v2.15.0), built from
# their upstream git repositories at those tags with their own vendor/
# folders (no registry is reached; the Go module proxy does not serve these
# two modules), into the cluster cache beside the Kubernetes binaries:
#   ${STFS_CLUSTER_CACHE:-/var/cache/stfs-cluster}/sidecars/<name>-<tag>
# Each REPO_GIT is a git directory (a clone or a bare mirror) holding the tag.
set -euo pipefail
[ $# -eq 2 ] || { sed -n '2,9p' "$0" >&2; exit 2; }
out=${STFS_CLUSTER_CACHE:-/var/cache/stfs-cluster}/sidecars
mkdir -p "$out"
build() {   # GITDIR TAG CMD NAME
	local dst="$out/$4-$2" tmp t0
	[ -x "$dst" ] && return 0
	t0=$(date +%s)
	tmp=$(mktemp -d)
	git --git-dir="$1" archive "$2" | tar -x -C "$tmp"
	(cd "$tmp" && CGO_ENABLED=0 GOFLAGS=-mod=vendor GOTOOLCHAIN=local \
		nice -n 19 go build -p 1 -trimpath \
		-ldflags "-s -w -X main.version=$2" -o "$dst.tmp" "./cmd/$3")
	rm -rf "$tmp"
	mv "$dst.tmp" "$dst"
	echo "build-sidecars.sh: $4 $2 built in $(( $(date +%s) - t0 )) s" >&2
}
build "$1" v2.13.0 csi-node-driver-registrar csi-node-driver-registrar
build "$2" v2.15.0 livenessprobe livenessprobe
echo "$out"
