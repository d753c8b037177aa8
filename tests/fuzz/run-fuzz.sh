#!/bin/bash
# run-fuzz.sh [SECONDS]: build the libFuzzer harness with clang (ASan +
# UBSan), seed it with the header of every file in shared/data/real and the
# regression inputs, and fuzz for SECONDS (default 60).  Crashes are kept
# in tests/fuzz/regressions/ for review and become regression inputs.
set -euo pipefail
cd "$(dirname "$0")/../.."
secs=${1:-60}
out=build-fuzz
mkdir -p "$out/corpus" "$out/seeds"
clang -g -O1 -fsanitize=fuzzer,address,undefined \
	-fno-sanitize-recover=all -Iinclude \
	src/lib/dtype.c src/lib/header.c src/lib/names.c src/lib/text.c \
	src/lib/tree.c src/lib/utf8.c tests/fuzz/fuzz_header.c \
	-lm -o "$out/fuzz_header"
shared=${STFS_SHARED:-../shared}
python3 - "$shared/data/real" examples "$out/seeds" <<'PY'
import os, struct, sys
*srcs, dst = sys.argv[1:]
n = 0
for src in srcs:
    for root, _, files in os.walk(src):
        for f in files:
            if not f.endswith(".safetensors"):
                continue
            with open(os.path.join(root, f), "rb") as fh:
                head = fh.read(8)
                if len(head) < 8:
                    continue
                ln = struct.unpack("<Q", head)[0]
                if ln > 1 << 20:
                    continue
                with open(os.path.join(dst, "seed%03d" % n), "wb") as o:
                    o.write(fh.read(ln))
                n += 1
print("fuzz: %d seed headers" % n)
PY
"$out/fuzz_header" -max_total_time="$secs" -max_len=65536 \
	-print_final_stats=1 -artifact_prefix=tests/fuzz/regressions/ \
	"$out/corpus" "$out/seeds" tests/fuzz/regressions 2>&1 |
	grep -E "^(#|stat::|==|SUMMARY|Done|fuzz)" | grep -vE "^#[0-9]+\s+(NEW|REDUCE|pulse)" | tail -20
rc=${PIPESTATUS[0]}
echo "fuzz: exit $rc"
exit "$rc"
