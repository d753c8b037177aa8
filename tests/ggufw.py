"""ggufw.py: the tests' own GGUF writer, quantizers and dequantizers.

Written from the published GGUF specification (the file layout and
value types) and ggml's published block layouts, independently of stfs:
- write(path, tensors, kvs, version=3, alignment=None): a GGUF v2 or v3
  file; tensors is a list of (name, ggml_type, shape_row_major, raw_bytes),
  kvs a list of (key, value_type, value) with value_type one of the names
  in VTYPES ("array" values are (elem_type, [values])).  Returns each
  tensor's (absolute offset, size) in the file.
- quantize(ggml_type, x): float32 array (its size a multiple of the block)
  to the blocks' bytes, by the quantization formulas (a scale, and for
  some types a minimum, per block and sub-block);
- dequantize(ggml_type, raw, n): the blocks back to float32, vectorized
  with numpy, from the block layouts (a second, independent reading of the
  same layouts as stfs's C code).
"""
import struct

import numpy as np

VTYPES = {"u8": 0, "i8": 1, "u16": 2, "i16": 3, "u32": 4, "i32": 5,
          "f32": 6, "bool": 7, "string": 8, "array": 9, "u64": 10,
          "i64": 11, "f64": 12}
PACK = {"u8": "<B", "i8": "<b", "u16": "<H", "i16": "<h", "u32": "<I",
        "i32": "<i", "f32": "<f", "bool": "<?", "u64": "<Q", "i64": "<q",
        "f64": "<d"}

# ggml type id, elements per block, bytes per block
GGML = {"F32": (0, 1, 4), "F16": (1, 1, 2), "Q4_0": (2, 32, 18),
        "Q4_1": (3, 32, 20), "Q5_0": (6, 32, 22), "Q5_1": (7, 32, 24),
        "Q8_0": (8, 32, 34), "Q8_1": (9, 32, 36), "Q2_K": (10, 256, 84),
        "Q3_K": (11, 256, 110), "Q4_K": (12, 256, 144),
        "Q5_K": (13, 256, 176), "Q6_K": (14, 256, 210),
        "Q8_K": (15, 256, 292), "IQ4_NL": (20, 32, 18),
        "I8": (24, 1, 1), "I16": (25, 1, 2), "I32": (26, 1, 4),
        "I64": (27, 1, 8), "F64": (28, 1, 8), "BF16": (30, 1, 2)}
# the safetensors dtype of the plain types
PLAIN = {"F32": "F32", "F16": "F16", "BF16": "BF16", "F64": "F64",
         "I8": "I8", "I16": "I16", "I32": "I32", "I64": "I64"}


def gstr(s):
    b = s.encode() if isinstance(s, str) else s
    return struct.pack("<Q", len(b)) + b


def value(vt, v):
    if vt == "string":
        return gstr(v)
    if vt == "array":
        et, items = v
        out = struct.pack("<IQ", VTYPES[et], len(items))
        return out + b"".join(value(et, x) for x in items)
    return struct.pack(PACK[vt], v)


def nbytes(gtype, shape):
    _, blk, size = GGML[gtype]
    n = int(np.prod(shape, dtype=np.uint64)) if shape else 1
    assert n % blk == 0
    return n // blk * size


def write(path, tensors, kvs, version=3, alignment=None, extra=b""):
    """Write the file; returns {name: (absolute offset, size)}."""
    align = alignment or 32
    kv = list(kvs)
    if alignment is not None:
        kv.append(("general.alignment", "u32", alignment))
    head = b"GGUF" + struct.pack("<IQQ", version, len(tensors), len(kv))
    for k, vt, v in kv:
        head += gstr(k) + struct.pack("<I", VTYPES[vt]) + value(vt, v)
    offs, at = [], 0
    for name, gt, shape, raw in tensors:
        assert len(raw) == nbytes(gt, shape), name
        offs.append(at)
        at += len(raw)
        at = (at + align - 1) // align * align
    for (name, gt, shape, raw), off in zip(tensors, offs):
        dims = list(reversed(shape))      # innermost first
        head += gstr(name) + struct.pack("<I", len(dims))
        head += b"".join(struct.pack("<Q", d) for d in dims)
        head += struct.pack("<IQ", GGML[gt][0], off)
    head += extra
    data_start = (len(head) + align - 1) // align * align
    out = bytearray(head + b"\0" * (data_start - len(head)))
    where = {}
    for (name, gt, shape, raw), off in zip(tensors, offs):
        pos = data_start + off
        out += b"\0" * (pos - len(out))
        out += raw
        where[name] = (pos, len(raw))
    with open(path, "wb") as f:
        f.write(bytes(out))
    return where


# ---- quantizers -------------------------------------------------------------

def f16(a):
    return np.asarray(a, dtype=np.float32).astype("<f2")


def _q8_0(x):
    b = x.reshape(-1, 32)
    amax = np.abs(b).max(axis=1)
    d = (amax / 127).astype(np.float32)
    inv = np.where(d > 0, 1 / np.where(d > 0, d, 1), 0).astype(np.float32)
    q = np.clip(np.rint(b * inv[:, None]), -127, 127).astype(np.int8)
    out = np.zeros((b.shape[0], 34), np.uint8)
    out[:, 0:2] = f16(d).view(np.uint8).reshape(-1, 2)
    out[:, 2:] = q.view(np.uint8)
    return out.tobytes()


def _q4_0(x):
    b = x.reshape(-1, 32)
    idx = np.abs(b).argmax(axis=1)
    mx = b[np.arange(b.shape[0]), idx]
    d = (mx / -8).astype(np.float32)
    inv = np.where(d != 0, 1 / np.where(d != 0, d, 1), 0).astype(np.float32)
    q = np.clip(np.floor(b * inv[:, None] + 8.5), 0, 15).astype(np.uint8)
    out = np.zeros((b.shape[0], 18), np.uint8)
    out[:, 0:2] = f16(d).view(np.uint8).reshape(-1, 2)
    out[:, 2:] = q[:, :16] | (q[:, 16:] << 4)
    return out.tobytes()


def _kscales(x, qmax):
    """Per 32-element sub-block scale and minimum of a K block, as
    6-bit numbers under the block's d and dmin."""
    b = x.reshape(-1, 8, 32)
    lo = np.minimum(b.min(axis=2), 0)
    hi = b.max(axis=2)
    s = (hi - lo) / qmax
    m = -lo
    d = (s.max(axis=1) / 63).astype(np.float32)
    dm = (m.max(axis=1) / 63).astype(np.float32)
    d16, dm16 = f16(d), f16(dm)
    df, dmf = d16.astype(np.float32), dm16.astype(np.float32)
    sc = np.clip(np.rint(s / np.where(df > 0, df, 1)[:, None]), 0, 63)
    mn = np.clip(np.rint(m / np.where(dmf > 0, dmf, 1)[:, None]), 0, 63)
    sc, mn = sc.astype(np.uint8), mn.astype(np.uint8)
    eff = df[:, None] * sc.astype(np.float32)
    off = dmf[:, None] * mn.astype(np.float32)
    q = np.rint((b + off[:, :, None]) / np.where(eff > 0, eff, 1)[:, :, None])
    q = np.clip(q, 0, qmax).astype(np.uint8)
    packed = np.zeros((b.shape[0], 12), np.uint8)
    packed[:, 0:4] = (sc[:, 0:4] & 63) | ((sc[:, 4:8] >> 4) << 6)
    packed[:, 4:8] = (mn[:, 0:4] & 63) | ((mn[:, 4:8] >> 4) << 6)
    packed[:, 8:12] = (sc[:, 4:8] & 15) | ((mn[:, 4:8] & 15) << 4)
    head = np.concatenate([d16.view(np.uint8).reshape(-1, 2),
                           dm16.view(np.uint8).reshape(-1, 2), packed], 1)
    return head, q.reshape(-1, 256)


def _q4_k(x):
    head, q = _kscales(x, 15)
    c = q.reshape(-1, 4, 2, 32)
    qs = (c[:, :, 0, :] | (c[:, :, 1, :] << 4)).reshape(-1, 128)
    return np.concatenate([head, qs], 1).astype(np.uint8).tobytes()


def _q5_k(x):
    head, q = _kscales(x, 31)
    c = q.reshape(-1, 4, 2, 32)
    lo = c & 15
    qs = (lo[:, :, 0, :] | (lo[:, :, 1, :] << 4)).reshape(-1, 128)
    hb = (c >> 4) & 1                      # [blocks, chunk, half, 32]
    qh = np.zeros((q.shape[0], 32), np.uint8)
    for ch in range(4):
        for h in range(2):
            qh |= (hb[:, ch, h, :] << (2 * ch + h)).astype(np.uint8)
    return np.concatenate([head, qh, qs], 1).astype(np.uint8).tobytes()


def _q6_k(x):
    b = x.reshape(-1, 16, 16)
    amax = np.abs(b).max(axis=2)
    ss = amax / 31
    d = (ss.max(axis=1) / 127).astype(np.float32)
    d16 = f16(d)
    df = d16.astype(np.float32)
    sc = np.clip(np.rint(ss / np.where(df > 0, df, 1)[:, None]), -128, 127)
    sc = sc.astype(np.int8)
    eff = df[:, None] * sc.astype(np.float32)
    q = np.rint(b / np.where(eff != 0, eff, 1)[:, :, None])
    q = (np.clip(q, -32, 31) + 32).astype(np.uint8).reshape(-1, 2, 128)
    ql = np.zeros((q.shape[0], 2, 64), np.uint8)
    qh = np.zeros((q.shape[0], 2, 32), np.uint8)
    for k in range(4):                     # y[l + 32k], l < 32
        part = q[:, :, 32 * k:32 * k + 32]
        low, high = part & 15, part >> 4
        if k == 0:
            ql[:, :, 0:32] |= low
        elif k == 1:
            ql[:, :, 32:64] |= low
        elif k == 2:
            ql[:, :, 0:32] |= low << 4
        else:
            ql[:, :, 32:64] |= low << 4
        qh |= (high << (2 * k)).astype(np.uint8)
    out = np.concatenate([ql.reshape(-1, 128), qh.reshape(-1, 64),
                          sc.view(np.uint8), d16.view(np.uint8).reshape(-1, 2)],
                         1)
    return out.astype(np.uint8).tobytes()


QUANTIZE = {"Q8_0": _q8_0, "Q4_0": _q4_0, "Q4_K": _q4_k, "Q5_K": _q5_k,
            "Q6_K": _q6_k}


def quantize(gtype, x):
    return QUANTIZE[gtype](np.asarray(x, np.float32).ravel())


# ---- dequantizers -----------------------------------------------------------

def _half(u8, at):
    return u8[:, at:at + 2].copy().view("<f2").astype(np.float32)[:, 0]


def _scale_min(p):
    """The 8 six-bit scales and minimums of 12 packed bytes per block."""
    p = p.astype(np.uint8)
    sc = np.zeros((p.shape[0], 8), np.uint8)
    mn = np.zeros((p.shape[0], 8), np.uint8)
    sc[:, :4] = p[:, 0:4] & 63
    mn[:, :4] = p[:, 4:8] & 63
    sc[:, 4:] = (p[:, 8:12] & 15) | ((p[:, 0:4] >> 6) << 4)
    mn[:, 4:] = (p[:, 8:12] >> 4) | ((p[:, 4:8] >> 6) << 4)
    return sc.astype(np.float32), mn.astype(np.float32)


def dequantize(gtype, raw, n):
    with np.errstate(invalid="ignore", over="ignore"):
        return _dequantize(gtype, raw, n)


def _dequantize(gtype, raw, n):
    _, blk, size = GGML[gtype]
    u8 = np.frombuffer(raw, np.uint8).reshape(-1, size)
    nb = u8.shape[0]
    if gtype == "Q8_0":
        d = _half(u8, 0)
        q = u8[:, 2:].view(np.int8).astype(np.float32)
        y = d[:, None] * q
    elif gtype == "Q4_0":
        d = _half(u8, 0)
        q = np.concatenate([u8[:, 2:] & 15, u8[:, 2:] >> 4], 1)
        y = d[:, None] * (q.astype(np.float32) - 8)
    elif gtype == "Q4_1":
        d, m = _half(u8, 0), _half(u8, 2)
        q = np.concatenate([u8[:, 4:] & 15, u8[:, 4:] >> 4], 1)
        y = d[:, None] * q.astype(np.float32) + m[:, None]
    elif gtype == "Q5_0":
        d = _half(u8, 0)
        qh = u8[:, 2:6].copy().view("<u4")[:, 0]
        bits = (qh[:, None] >> np.arange(32, dtype=np.uint32)) & 1
        q = np.concatenate([u8[:, 6:] & 15, u8[:, 6:] >> 4], 1)
        q = q.astype(np.int32) | (bits.astype(np.int32) << 4)
        y = d[:, None] * (q - 16).astype(np.float32)
    elif gtype == "Q2_K":
        sc = u8[:, 0:16]
        qs = u8[:, 16:80].reshape(nb, 2, 32)
        d, dm = _half(u8, 80), _half(u8, 82)
        # element order: half, shift (2 bits), 16-lane group, lane
        q = np.stack([(qs >> s) & 3 for s in (0, 2, 4, 6)], 2)
        q = q.reshape(nb, 2, 4, 2, 16).astype(np.float32)
        s = sc.reshape(nb, 2, 4, 2)
        dl = d[:, None, None, None] * (s & 15).astype(np.float32)
        ml = dm[:, None, None, None] * (s >> 4).astype(np.float32)
        y = dl[..., None] * q - ml[..., None]
    elif gtype in ("Q4_K", "Q5_K"):
        d, dm = _half(u8, 0), _half(u8, 2)
        sc, mn = _scale_min(u8[:, 4:16])
        qs = u8[:, 16:144] if gtype == "Q4_K" else u8[:, 48:176]
        c = qs.reshape(nb, 4, 32)
        q = np.stack([c & 15, c >> 4], 2).reshape(nb, 8, 32)
        q = q.astype(np.float32)
        if gtype == "Q5_K":
            qh = u8[:, 16:48]
            bits = np.stack([(qh >> s) & 1 for s in range(8)], 1)
            q += 16 * bits.astype(np.float32)
        y = (d[:, None] * sc)[:, :, None] * q - (dm[:, None] * mn)[:, :, None]
    elif gtype == "Q6_K":
        ql = u8[:, 0:128].reshape(nb, 2, 64)
        qh = u8[:, 128:192].reshape(nb, 2, 32)
        sc = u8[:, 192:208].view(np.int8).astype(np.float32).reshape(nb, 2, 8)
        d = _half(u8, 208)
        parts = [(ql[:, :, 0:32] & 15) | ((qh & 3) << 4),
                 (ql[:, :, 32:64] & 15) | (((qh >> 2) & 3) << 4),
                 (ql[:, :, 0:32] >> 4) | (((qh >> 4) & 3) << 4),
                 (ql[:, :, 32:64] >> 4) | (((qh >> 6) & 3) << 4)]
        q = np.concatenate(parts, 2).astype(np.float32) - 32  # nb,2,128
        s = np.repeat(sc, 16, axis=2)                         # nb,2,128
        y = d[:, None, None] * s * q
    else:
        raise ValueError(gtype)
    return y.reshape(-1)[:n].astype(np.float32)
