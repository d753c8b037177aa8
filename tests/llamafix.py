"""llamafix.py: fixtures of test_llamajs.py: a tiny llama-architecture
GGUF written by the tests (tests/ggufw.py) that llama.cpp loads and runs,
and the run of tests/llamajs/check.mjs (node-llama-cpp's prebuilt CPU
binary) on model files.

The model: 2 layers, embedding 64, 4 heads (2 key/value heads, so the
grouped-query shapes are exercised), feed-forward 128, context 128, a
SentencePiece ("llama") vocabulary of 300 pieces (<unk>, <s>, </s>, the
256 byte pieces, the letters and some words), every tensor F32 from a
seeded generator, so the greedy tokens are a function of the bytes.
"""
import json
import os
import shutil
import subprocess

import numpy as np

import ggufw as G

HERE = os.path.dirname(os.path.abspath(__file__))
LLAMAJS = os.path.join(HERE, "llamajs")
PROMPT = "the cat sat on a mat"
N_TOKENS = 8

EMBD, LAYERS, HEADS, KV_HEADS, FF, CTX = 64, 2, 4, 2, 128, 128
SPACE = "\u2581"              # SentencePiece's word-start mark
WORDS = ["the", "cat", "sat", "on", "a", "mat", "dog", "ran", "to", "is"]


def vocab():
    """(pieces, scores, token types): <unk>, <s>, </s>, 256 byte pieces,
    then the pieces the prompt is made of, padded to 300."""
    toks = ["<unk>", "<s>", "</s>"]
    types = [2, 3, 3]                     # unknown, control, control
    toks += ["<0x%02X>" % b for b in range(256)]
    types += [6] * 256                    # byte
    pieces = [SPACE] + [chr(c) for c in range(ord("a"), ord("z") + 1)]
    pieces += [SPACE + c for c in "abcdefghijklmnopqrstuvwxyz"]
    pieces += [SPACE + w for w in WORDS if len(w) > 1]
    pieces += ["at", "an", "he", "th", "in", "er", "on", "re", "is", "to"]
    toks += pieces
    types += [1] * len(pieces)            # normal
    while len(toks) < 300:
        toks.append("<pad%d>" % len(toks))
        types.append(4)                   # user defined
    # a longer piece scores higher, so the merges prefer whole words
    scores = [0.0] * 259 + [-10.0 + len(t) for t in toks[259:]]
    return toks, scores, types


def prompt_ids():
    """The ids the prompt is, by the vocabulary: <s>, then one piece per
    word (each word a piece of its own, with its word-start mark)."""
    toks = vocab()[0]
    return [1] + [toks.index(SPACE + w) for w in PROMPT.split()]


def tensors(seed):
    """(name, "F32", row-major shape, bytes) of every weight."""
    rng = np.random.default_rng(seed)
    nv = len(vocab()[0])
    hd = EMBD // HEADS

    def w(*shape, scale=None):
        s = scale if scale is not None else 1 / np.sqrt(shape[-1])
        a = (rng.standard_normal(shape) * s).astype("<f4")
        return a.tobytes()

    def norm():
        return (1 + 0.1 * rng.standard_normal(EMBD)).astype("<f4").tobytes()

    out = [("token_embd.weight", [nv, EMBD], w(nv, EMBD, scale=1.0))]
    for i in range(LAYERS):
        b = "blk.%d." % i
        out += [(b + "attn_norm.weight", [EMBD], norm()),
                (b + "attn_q.weight", [HEADS * hd, EMBD], w(HEADS * hd, EMBD)),
                (b + "attn_k.weight", [KV_HEADS * hd, EMBD],
                 w(KV_HEADS * hd, EMBD)),
                (b + "attn_v.weight", [KV_HEADS * hd, EMBD],
                 w(KV_HEADS * hd, EMBD)),
                (b + "attn_output.weight", [EMBD, HEADS * hd],
                 w(EMBD, HEADS * hd)),
                (b + "ffn_norm.weight", [EMBD], norm()),
                (b + "ffn_gate.weight", [FF, EMBD], w(FF, EMBD)),
                (b + "ffn_up.weight", [FF, EMBD], w(FF, EMBD)),
                (b + "ffn_down.weight", [EMBD, FF], w(EMBD, FF))]
    out += [("output_norm.weight", [EMBD], norm()),
            ("output.weight", [nv, EMBD], w(nv, EMBD, scale=2.0))]
    return [(n, "F32", s, b) for n, s, b in out]


def kvs():
    toks, scores, types = vocab()
    return [("general.architecture", "string", "llama"),
            ("general.name", "string", "stfs tiny llama"),
            ("llama.context_length", "u32", CTX),
            ("llama.embedding_length", "u32", EMBD),
            ("llama.block_count", "u32", LAYERS),
            ("llama.feed_forward_length", "u32", FF),
            ("llama.attention.head_count", "u32", HEADS),
            ("llama.attention.head_count_kv", "u32", KV_HEADS),
            ("llama.attention.layer_norm_rms_epsilon", "f32", 1e-5),
            ("llama.rope.dimension_count", "u32", EMBD // HEADS),
            ("llama.rope.freq_base", "f32", 10000.0),
            ("llama.vocab_size", "u32", len(toks)),
            ("general.file_type", "u32", 0),        # all F32
            ("tokenizer.ggml.model", "string", "llama"),
            ("tokenizer.ggml.tokens", "array", ("string", toks)),
            ("tokenizer.ggml.scores", "array", ("f32", scores)),
            ("tokenizer.ggml.token_type", "array", ("i32", types)),
            ("tokenizer.ggml.unknown_token_id", "u32", 0),
            ("tokenizer.ggml.bos_token_id", "u32", 1),
            ("tokenizer.ggml.eos_token_id", "u32", 2),
            ("tokenizer.ggml.add_bos_token", "bool", True),
            ("tokenizer.ggml.add_eos_token", "bool", False)]


def write_model(path, seed=7):
    """Write the model to path; returns its bytes and {tensor name:
    (offset, size)}."""
    where = G.write(path, tensors(seed), kvs())
    with open(path, "rb") as f:
        return f.read(), where


def wrong_byte(data, where):
    """data with one byte changed: the high byte of the first value of
    the embedding of the prompt's last piece (its exponent: the value
    changes by orders of magnitude, so the tokens do)."""
    off, _ = where["token_embd.weight"]
    last = vocab()[0].index(SPACE + PROMPT.split()[-1])
    b = bytearray(data)
    b[off + last * EMBD * 4 + 3] ^= 0x40
    return bytes(b)


def run_check(paths, timeout=300):
    """check.mjs on model files (one node process): {path: {"prompt":
    [ids], "tokens": [ids], "mapped": bool, "error": str}} in order."""
    node = shutil.which("node")
    mods = os.path.join(LLAMAJS, "node_modules", "node-llama-cpp")
    if not node or not os.path.isdir(mods):
        raise AssertionError("node or %s missing (npm ci in %s)" % (
            mods, LLAMAJS))
    r = subprocess.run([node, os.path.join(LLAMAJS, "check.mjs"),
                        PROMPT, str(N_TOKENS)] + list(paths),
                       capture_output=True, text=True, timeout=timeout)
    assert r.returncode == 0, r.stderr[-4000:]
    # the last line: anything node-llama-cpp itself prints comes before
    return json.loads(r.stdout.strip().splitlines()[-1])
