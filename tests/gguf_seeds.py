#!/usr/bin/env python3
"""gguf_seeds.py DIR: small GGUF files for fuzz_gguf's corpus (run-fuzz.sh),
written by the tests' own writer (ggufw.py): every value type and arrays of
them, arrays of arrays, plain and quantized tensors, v2 and v3, a custom
alignment, no tensors at all."""
import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import ggufw as G  # noqa: E402

out = sys.argv[1]
os.makedirs(out, exist_ok=True)
rng = np.random.default_rng(7)
x = rng.standard_normal(256).astype(np.float32)
kvs = [("general.architecture", "string", "llama"), ("u8", "u8", 7),
       ("i8", "i8", -7), ("u16", "u16", 700), ("i16", "i16", -700),
       ("u32", "u32", 70000), ("i32", "i32", -70000), ("f32", "f32", 1.5),
       ("bool", "bool", True), ("u64", "u64", 1 << 40),
       ("i64", "i64", -(1 << 40)), ("f64", "f64", 2.25),
       ("arr", "array", ("string", ["a", "b"])),
       ("nested", "array", ("array", [("i32", [1, 2]), ("u8", [3])]))]
plain = [("a.f32", "F32", [2, 2], x[:4].tobytes()),
         ("a.i8", "I8", [3], b"\1\2\3"),
         ("a.bf16", "BF16", [1], b"\0\0")]
quant = [("q.q8", "Q8_0", [32], G.quantize("Q8_0", x[:32])),
         ("q.q4k", "Q4_K", [256], G.quantize("Q4_K", x)),
         ("q.q6k", "Q6_K", [256], G.quantize("Q6_K", x))]
files = [(plain, kvs, 3, None), (plain + quant, kvs[:3], 2, None),
         (quant, [], 3, 64), ([], kvs, 3, None), (plain[:1], [], 3, 8)]
for i, (ts, kv, ver, al) in enumerate(files):
    G.write(os.path.join(out, "seed%03d" % i), ts, kv, version=ver,
            alignment=al)
print("fuzz: %d seed GGUF files" % len(files))
