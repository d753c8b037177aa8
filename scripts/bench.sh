#!/bin/bash
# bench.sh [ROUNDS]: the performance benchmark (tests/bench/bench.py): stfs
# side by side with direct reads of the source and with squashfuse_ll, medians
# of ROUNDS (default 5) rounds, ratios from the same run.  Needs root (for
# drop_caches and FUSE) and about 8 GB free in STFS_BENCH_DIR (default
# /var/tmp/stfs-bench, kept between runs).  Results: build-bench/results.md,
# results.json, results.png.  Takes 10-20 minutes.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/deps.sh
pkgs=(squashfs-tools squashfuse python3-matplotlib)
missing=()
for p in "${pkgs[@]}"; do
	dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "ok installed" ||
		missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
	DEBIAN_FRONTEND=noninteractive apt-get install -y -qq \
		--no-install-recommends "${missing[@]}" >/dev/null
fi
{ [ -d build-release ] || meson setup build-release --buildtype=release \
	>/dev/null; } && ninja -C build-release >/dev/null
STFS=$PWD/build-release/src/cli/stfs exec /usr/bin/python3 \
	tests/bench/bench.py "${STFS_BENCH_DIR:-/var/tmp/stfs-bench}" build-bench "${1:-5}"
