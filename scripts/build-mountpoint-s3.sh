#!/bin/bash
# build-mountpoint-s3.sh SRC [OUT]: build Mountpoint for Amazon S3's
# `mount-s3` from its source with cargo, for the side-by-side benchmark
# tests/bench/bench_s3_peers.py (not a test; nothing of it is committed).
#
# crates.io has no source of mount-s3 itself: its crate there,
# `mountpoint-s3`, is a placeholder (0.0.1, "Placeholder crate"), and the
# real one says `publish = false`.  What mount-s3 is made of is published:
# the file system, its prefetcher and the CRT S3 client
# (`mountpoint-s3-fs`, `mountpoint-s3-client`, and the AWS Common
# Runtime's C sources vendored in `mountpoint-s3-crt-sys`).  So this script
# takes the binary crate (mountpoint-s3/: its Cargo.toml, build.rs and
# src/, a few files of command line) from SRC, a checkout of
# https://github.com/awslabs/mountpoint-s3 (a git directory, read at REV,
# HEAD by default, or a plain folder), and builds it alone against the
# versions of those crates its workspace names, from crates.io, with its
# other dependencies: no git submodule is needed.  Build a release tag:
# REV=v1.23.0 (the newest tag in November 2026) builds against
# mountpoint-s3-fs 0.10 and mountpoint-s3-client 0.21.  The workspace's
# release profile (LTO, one codegen unit) is not carried over: a plain
# `--release` build, much quicker on a shared machine; the CRT's C, where
# the bytes move, is built by cmake in its release mode either way.
#
# The build compiles the CRT's C and a few hundred crates: minutes of
# both cores.  It runs under `nice -n 19`, and refuses to start while the
# machine's load is above its number of cores (FORCE=1 to start anyway).
# OUT (default build-mount-s3/ here) gets `mount-s3`; the cargo target
# directory is OUT/target.  FETCH_ONLY=1 stops after `cargo fetch` (the
# sources resolved and downloaded, nothing compiled).
set -euo pipefail
src=${1:?usage: build-mountpoint-s3.sh SRC [OUT] (SRC: a checkout of awslabs/mountpoint-s3)}
out=$(realpath -m "${2:-build-mount-s3}")
rev=${REV:-HEAD}
command -v cargo >/dev/null || {
	echo "build-mountpoint-s3: cargo is not on PATH (rustup, or Debian's cargo)" >&2
	exit 1
}
# the AWS CRT's C is built by cmake with a C compiler (its bindings with
# clang's libclang), the FUSE binding links libfuse3 found by pkg-config:
# Debian's cmake clang libclang-dev pkg-config libfuse3-dev.  Not in
# scripts/deps.sh: only this benchmark's peer needs them.
missing=
for tool in cmake clang pkg-config; do
	command -v "$tool" >/dev/null || missing="$missing $tool"
done
pkg-config --exists fuse3 2>/dev/null || missing="$missing libfuse3-dev"
if [ -n "$missing" ]; then
	echo "build-mountpoint-s3: missing build dependencies:$missing (apt-get install cmake clang libclang-dev pkg-config libfuse3-dev)" >&2
	exit 1
fi
cores=$(nproc)
load=$(cut -d' ' -f1 /proc/loadavg)
if [ "${FORCE:-0}" != 1 ] && awk -v l="$load" -v c="$cores" 'BEGIN{exit !(l > c)}'; then
	echo "build-mountpoint-s3: the load is $load on $cores cores: not now (FORCE=1 to build anyway)" >&2
	exit 1
fi
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
# the binary crate, and the workspace's manifest (for the versions)
if git -C "$src" rev-parse --git-dir >/dev/null 2>&1; then
	git -C "$src" archive "$rev" mountpoint-s3/Cargo.toml \
		mountpoint-s3/build.rs mountpoint-s3/src Cargo.toml Cargo.lock |
		tar -x -C "$work"
else
	mkdir -p "$work/mountpoint-s3"
	cp "$src/Cargo.toml" "$src/Cargo.lock" "$work/"
	cp -r "$src/mountpoint-s3/Cargo.toml" "$src/mountpoint-s3/build.rs" \
		"$src/mountpoint-s3/src" "$work/mountpoint-s3/"
fi
crate="$work/mountpoint-s3"
ver() {   # the version the workspace gives crate $1
	sed -n "s/^$1 = { version = \"\([^\"]*\)\".*/\1/p" "$work/Cargo.toml"
}
fsv=$(ver mountpoint-s3-fs)
clv=$(ver mountpoint-s3-client)
[ -n "$fsv" ] && [ -n "$clv" ] || {
	echo "build-mountpoint-s3: $src: no mountpoint-s3-fs/-client version in its Cargo.toml" >&2
	exit 1
}
echo "build-mountpoint-s3: mount-s3 $(sed -n 's/^version = "\(.*\)"/\1/p' "$crate/Cargo.toml" | head -1)" \
	"with mountpoint-s3-fs $fsv and mountpoint-s3-client $clv from crates.io"
# alone: the workspace's crates from crates.io, no test dependencies
# (they name the workspace's folders), a workspace of its own
python3 - "$crate/Cargo.toml" "$fsv" "$clv" <<'EOF'
import re, sys
path, fsv, clv = sys.argv[1:]
text = open(path).read()
text = text.replace('mountpoint-s3-fs = { workspace = true }',
                    'mountpoint-s3-fs = "%s"' % fsv)
text = text.replace('mountpoint-s3-client = { workspace = true }',
                    'mountpoint-s3-client = "%s"' % clv)
text = re.sub(r'\n\[dev-dependencies\]\n.*?(?=\n\[)', '\n', text, flags=re.S)
text = re.sub(r'\n\[lints\]\n[^\[]*', '\n', text)
text = re.sub(r'\n\[\[bin\]\]\nname = "mock-mount-s3"\n[^\[]*', '\n', text)
if 'workspace = true' in text:
    sys.exit("build-mountpoint-s3: %s still names its workspace" % path)
open(path, "w").write(text + "\n[workspace]\n")
EOF
# the workspace's lock: its dependencies at the versions Mountpoint tested
cp "$work/Cargo.lock" "$crate/"
mkdir -p "$out"
(cd "$crate" && cargo fetch)
if [ "${FETCH_ONLY:-0}" = 1 ]; then
	echo "build-mountpoint-s3: fetched (FETCH_ONLY=1: not built)"
	exit 0
fi
(cd "$crate" && CARGO_TARGET_DIR="$out/target" nice -n 19 \
	cargo build --release --bin mount-s3)
cp "$out/target/release/mount-s3" "$out/mount-s3"
"$out/mount-s3" --version
echo "build-mountpoint-s3: $out/mount-s3"
