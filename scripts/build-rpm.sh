#!/bin/bash
# build-rpm.sh [OUTDIR]: build the RPM packages from packaging/rpm/stfs.spec
# with rpmbuild (on Debian: the `rpm` package; build dependencies are
# Debian packages there, so --nodeps).  RPMs land in OUTDIR (build-rpm/).
set -euo pipefail
ver=$(sed -nE "s/^ *version: .([0-9.]+).,/\1/p" "$(dirname "$0")/../meson.build" | head -1)
cd "$(dirname "$0")/.."
out=$(realpath -m "${1:-build-rpm}")
work=$(mktemp -d /tmp/stfs-rpm.XXXXXX)
trap 'rm -rf "$work"' EXIT
mkdir -p "$work/SOURCES" "$work/stfs-$ver" "$out"
if git rev-parse --git-dir >/dev/null 2>&1; then
	git ls-files -co --exclude-standard -z |
		xargs -0 cp --parents -t "$work/stfs-$ver"
else
	tar --exclude='./build*' -cf - . | tar -xf - -C "$work/stfs-$ver"
fi
tar -czf "$work/SOURCES/stfs-$ver.tar.gz" -C "$work" stfs-$ver
deps=()
[ -f /etc/debian_version ] && deps=(--nodeps --define 'debug_package %{nil}')
rpmbuild --define "_topdir $work" "${deps[@]}" -bb packaging/rpm/stfs.spec \
	>"$work/log" 2>&1 || {
	tail -40 "$work/log"
	echo "build-rpm: rpmbuild failed" >&2
	exit 1
}
find "$work/RPMS" -name '*.rpm' -exec mv -t "$out" {} +
ls "$out"/*.rpm
