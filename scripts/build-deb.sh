#!/bin/bash
# build-deb.sh [OUTDIR]: build the Debian packages (stfs, libstfs2,
# libstfs-dev) from the committed tree plus local changes, with
# packaging/debian as debian/, by `dpkg-buildpackage -us -uc -b`.
# The .deb files land in OUTDIR (default: build-deb/).
set -euo pipefail
ver=$(sed -nE "s/^ *version: .([0-9.]+).,/\1/p" "$(dirname "$0")/../meson.build" | head -1)
cd "$(dirname "$0")/.."
out=$(realpath -m "${1:-build-deb}")
work=$(mktemp -d /tmp/stfs-deb.XXXXXX)
trap 'rm -rf "$work"' EXIT
mkdir -p "$work/stfs-$ver" "$out"
if git rev-parse --git-dir >/dev/null 2>&1; then
	git ls-files -co --exclude-standard -z | grep -zv '^packaging/debian/' |
		xargs -0 cp --parents -t "$work/stfs-$ver"
else
	tar --exclude='./build*' -cf - . | tar -xf - -C "$work/stfs-$ver"
fi
cp -r packaging/debian "$work/stfs-$ver/debian"
(cd "$work/stfs-$ver" && dpkg-buildpackage -us -uc -b >"$work/log" 2>&1) || {
	tail -40 "$work/log"
	echo "build-deb: dpkg-buildpackage failed" >&2
	exit 1
}
mv "$work"/*.deb "$out"/
ls "$out"/*.deb
