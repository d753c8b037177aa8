#!/usr/bin/env python3
"""make-sample.py: write examples/tiny-llama.safetensors, the small sample
model the README's quick start mounts: a 2-layer Llama-shaped network with
BF16 weights, F32 norms, and __metadata__, as `safetensors` would save it.
Deterministic; standard library only.
"""
import json
import math
import os
import random
import struct

H, FF, V, L = 32, 64, 256, 2
rnd = random.Random(2024)


def bf16(values):
    out = bytearray()
    for v in values:
        bits = struct.unpack("<I", struct.pack("<f", v))[0]
        bits += 0x7FFF + ((bits >> 16) & 1)        # round to nearest even
        out += struct.pack("<H", (bits >> 16) & 0xFFFF)
    return bytes(out)


def f32(values):
    return struct.pack("<%df" % len(values), *values)


def weight(rows, cols):
    s = 1 / math.sqrt(cols)
    return bf16([rnd.gauss(0, s) for _ in range(rows * cols)])


tensors = [("model.embed_tokens.weight", "BF16", [V, H], weight(V, H))]
for i in range(L):
    p = "model.layers.%d." % i
    for n in ("q_proj", "k_proj", "v_proj", "o_proj"):
        tensors.append((p + "self_attn.%s.weight" % n, "BF16", [H, H],
                        weight(H, H)))
    tensors.append((p + "mlp.gate_proj.weight", "BF16", [FF, H],
                    weight(FF, H)))
    tensors.append((p + "mlp.up_proj.weight", "BF16", [FF, H], weight(FF, H)))
    tensors.append((p + "mlp.down_proj.weight", "BF16", [H, FF],
                    weight(H, FF)))
    tensors.append((p + "input_layernorm.weight", "F32", [H], f32([1.0] * H)))
    tensors.append((p + "post_attention_layernorm.weight", "F32", [H],
                    f32([1.0] * H)))
tensors.append(("model.norm.weight", "F32", [H], f32([1.0] * H)))
tensors.append(("lm_head.weight", "BF16", [V, H], weight(V, H)))

header = {"__metadata__": {"format": "pt", "model": "tiny-llama-sample",
                           "layers": str(L)}}
off = 0
for name, dt, shape, data in tensors:
    header[name] = {"dtype": dt, "shape": shape,
                    "data_offsets": [off, off + len(data)]}
    off += len(data)
h = json.dumps(header, separators=(",", ":")).encode()
h += b" " * (-len(h) % 8)
out = os.path.join(os.path.dirname(os.path.abspath(__file__)),
                   "tiny-llama.safetensors")
with open(out, "wb") as f:
    f.write(struct.pack("<Q", len(h)) + h)
    for t in tensors:
        f.write(t[3])
print(out, off + 8 + len(h), "bytes")
