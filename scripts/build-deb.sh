#!/bin/bash
# build-deb.sh [OUTDIR]: build the Debian packages (stfs, libstfs0,
# libstfs-dev) from the committed tree plus local changes, with
# packaging/debian as debian/, by `dpkg-buildpackage -us -uc -b`.
# The .deb files land in OUTDIR (default: build-deb/).
set -euo pipefail
cd "$(dirname "$0")/.."
out=$(realpath -m "${1:-build-deb}")
work=$(mktemp -d /tmp/stfs-deb.XXXXXX)
trap 'rm -rf "$work"' EXIT
mkdir -p "$work/stfs-0.1.0" "$out"
if git rev-parse --git-dir >/dev/null 2>&1; then
	git ls-files -co --exclude-standard -z | grep -zv '^packaging/debian/' |
		xargs -0 cp --parents -t "$work/stfs-0.1.0"
else
	tar --exclude='./build*' -cf - . | tar -xf - -C "$work/stfs-0.1.0"
fi
cp -r packaging/debian "$work/stfs-0.1.0/debian"
(cd "$work/stfs-0.1.0" && dpkg-buildpackage -us -uc -b >"$work/log" 2>&1) || {
	tail -40 "$work/log"
	echo "build-deb: dpkg-buildpackage failed" >&2
	exit 1
}
mv "$work"/*.deb "$out"/
ls "$out"/*.deb
