#!/bin/bash
# bench-remote.sh [ROUNDS]: stfs reading a URL served on 127.0.0.1, side
# by side with curl (tests/bench/bench_remote.py): a 1 GiB tensor over
# connections capped at 100 MB/s (tests/servers/pacedhttp.py) and uncapped
# (nginx), cold and from the disk cache, beside curl keeping the bytes in
# a file and handing them to a reader through a pipe; a 191-shard mount
# over a 20 ms round trip.  As root; uses the data of scripts/bench.sh in STFS_BENCH_DIR
# (default /var/tmp/stfs-bench, made if missing).  Results:
# build-bench/remote.md.  A few minutes.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/deps.sh
{ [ -d build-release ] || meson setup build-release --buildtype=release \
	>/dev/null; } && ninja -C build-release >/dev/null
STFS=$PWD/build-release/src/cli/stfs exec /usr/bin/python3 \
	tests/bench/bench_remote.py "${STFS_BENCH_DIR:-/var/tmp/stfs-bench}" \
	build-bench "${1:-3}"
