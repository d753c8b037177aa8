#!/bin/bash
# demo.sh: build stfs, mount the bundled sample model, and show it off:
# the tree, one tensor's xattrs, its bytes, the header; then the same model
# with .npy and float32 views, loaded by numpy; then unmount.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/deps.sh demo
[ -d build ] || meson setup build >/dev/null
ninja -C build >/dev/null
STFS=$PWD/build/src/cli/stfs
MODEL=$PWD/examples/tiny-llama.safetensors
MNT=$(mktemp -d /tmp/stfs-demo.XXXXXX)
cleanup() {   # never changes the exit status
	if mountpoint -q "$MNT"; then fusermount3 -u "$MNT" || true; fi
	rmdir "$MNT" 2>/dev/null || true
}
trap cleanup EXIT
show() { printf '\n\033[1m$ %s\033[0m\n' "$*"; eval "$@" || true; }

show "$STFS" mount "$MODEL" "$MNT"
show ls -R "$MNT" '|' head -n 30
W="$MNT/model/layers/0/self_attn/q_proj/weight"
show getfattr -d "$W"
show stat -c "'%n: %s bytes, mode %A'" "$W"
show od -A d -t x2 -N 32 "$W"
show dd if="$MNT/model/norm/weight" bs=4 count=4 status=none '|' od -t f4
show getfattr -d "$MNT"
show head -c 240 "'$MNT/%header.json'"
echo
show "$STFS" inspect "$MODEL" '|' head -n 8
show "$STFS" umount "$MNT"
show "$STFS" mount -o npy,convert=f32 "$MODEL" "$MNT"
show ls "$MNT/lm_head" "$MNT/model/norm"
show /usr/bin/python3 -c "'import numpy as np; w = np.load(\"$MNT/lm_head/weight.f32.npy\", mmap_mode=\"r\"); print(w.dtype, w.shape, w[0, :4])'"
show "$STFS" umount "$MNT"
echo
echo "Try it yourself: mkdir -p /tmp/m && $STFS mount $MODEL /tmp/m"
