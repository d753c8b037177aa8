#!/usr/bin/env python3
"""bench_gguf.py WORK [ROUNDS]: a tensor read from a GGUF mount vs the same
bytes read from a safetensors mount, side by side in one run
(docs/performance.md, "GGUF").

WORK gets a GGUF file (written by tests/fixtures/ggufw.py) holding a 512 MiB F32
tensor and a Q8_0 and a Q4_K tensor of 64 Mi elements each, and a
safetensors file holding the same 512 MiB of F32 bytes.  Each round mounts
both (-o convert=f32) and reads, in turn (which first alternates from
round to round), the F32 tensor through each mount from start to end
(1 MiB reads; the sources in the page cache, the FUSE side fresh), then
again (re-read); then the .f32 (dequantized) views
of the quantized tensors.  The first round is a warm-up.  Prints the
medians, the per-round ratios GGUF / safetensors and their geometric mean
(rounds alternate which mount starts first and which is read first, so a
pair of rounds cancels the order's effect).
"""
import json
import os
import statistics
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path[:0] = [HERE] + [os.path.join(os.path.dirname(HERE), d)
                         for d in ("fixtures", "servers")]
import stfstest as T  # noqa: E402
import bench as B  # noqa: E402
import ggufw as G  # noqa: E402
import numpy as np  # noqa: E402

MiB = 1 << 20
N = 128 * MiB           # F32 elements: 512 MiB
NQ = 64 * MiB           # quantized elements


def make(work):
    g = os.path.join(work, "m.gguf")
    s = os.path.join(work, "m.safetensors")
    if os.path.exists(g) and os.path.exists(s):
        return g, s
    rng = np.random.default_rng(3)
    w = rng.standard_normal(N, dtype=np.float32)
    x = rng.standard_normal(1 << 20).astype(np.float32)
    q8 = G.quantize("Q8_0", x) * (NQ >> 20)      # a block pattern, repeated
    q4 = G.quantize("Q4_K", x) * (NQ >> 20)
    G.write(g, [("w", "F32", [N // 4096, 4096], w.tobytes()),
                ("q8", "Q8_0", [NQ // 4096, 4096], q8),
                ("q4", "Q4_K", [NQ // 4096, 4096], q4)],
            [("general.architecture", "string", "bench")])
    T.write_st(s, [("w", "F32", [N // 4096, 4096], w.tobytes())])
    return g, s


def main():
    work = sys.argv[1]
    rounds = int(sys.argv[2]) if len(sys.argv) > 2 else 5
    os.makedirs(work, exist_ok=True)
    g, s = make(work)
    for p in (g, s):                 # the sources in the page cache
        B.read_range(p, prime=False)
    mg, ms = os.path.join(work, "mg"), os.path.join(work, "ms")
    os.makedirs(mg, exist_ok=True)
    os.makedirs(ms, exist_ok=True)
    vals = {k: [] for k in ("gguf", "st", "gguf_re", "st_re", "q8", "q4")}
    for r in range(rounds + 1):
        pg = T.mount_fg(g, mg, "-o", "convert=f32")
        ps = T.mount_fg(s, ms, "-o", "convert=f32")
        # in turn, and which goes first alternates: on a shared machine
        # the first of two reads in a row is often the slower
        order = [("gguf", mg), ("st", ms)]
        if r % 2 == 0:
            order.reverse()
        got = {}
        try:
            for k, m in order:
                got[k] = B.read_range(os.path.join(m, "w"))
            for k, m in order:
                got[k + "_re"] = B.read_range(os.path.join(m, "w"))
            got["q8"] = B.read_range(os.path.join(mg, "q8.f32"))
            got["q4"] = B.read_range(os.path.join(mg, "q4.f32"))
        finally:
            T.stop_fg(pg, mg)
            T.stop_fg(ps, ms)
        if r:                        # round 0 is the warm-up
            for k, v in got.items():
                vals[k].append(v)
    med = {k: statistics.median(v) / 1e6 for k, v in vals.items()}
    # the geometric mean of the per-round ratios: rounds alternate which
    # mount starts and reads first, and the effect of either (up to 1.6x
    # here) cancels over a pair of rounds
    per = [a / b for a, b in zip(vals["gguf"], vals["st"])]
    per_re = [a / b for a, b in zip(vals["gguf_re"], vals["st_re"])]
    ratio = statistics.geometric_mean(per)
    ratio_re = statistics.geometric_mean(per_re)
    print("per-round ratios: " + " ".join("%.2f" % x for x in per))
    print("re-read ratios:   " + " ".join("%.2f" % x for x in per_re))
    print("first read of a 512 MiB F32 tensor: GGUF %.0f MB/s, "
          "safetensors %.0f MB/s, ratio %.3f" % (med["gguf"], med["st"],
                                                  ratio))
    print("re-read:                            GGUF %.0f MB/s, "
          "safetensors %.0f MB/s, ratio %.3f" % (med["gguf_re"],
                                                  med["st_re"], ratio_re))
    print(".f32 view of Q8_0: %.0f MB/s of float32; of Q4_K: %.0f MB/s" %
          (med["q8"], med["q4"]))
    print(json.dumps({"rounds": rounds, "MBps": med, "ratio": ratio,
                      "ratio_reread": ratio_re, "values": vals}))
    return 0 if ratio >= 0.95 else 1


if __name__ == "__main__":
    sys.exit(main())
