#!/usr/bin/env python3
"""test_transformersjs.py: transformers.js loads a model from a mount.

A tiny BERT-like model the tests write (onnxfix.py: config.json, a
WordPiece tokenizer.json, tokenizer_config.json, onnx/model.onnx with its
tables in onnx/model.onnx_data, written with python3-onnx) is loaded by
@huggingface/transformers (pinned in tests/loaders/transformersjs/package-lock.json)
with env.localModelPath and no remote models: AutoConfig, AutoTokenizer
(encodings, a pair, decodings) and the feature-extraction pipeline, which
onnxruntime-node runs on the graph and its external data by path.  What
it gives from %repo/ (and from a mount with -o repo) equals what it gives
from the source directory, for a local directory, hf:// (the tests' Hub
emulator) and s3:// (the tests' Swift); the source's own output is the
model's (numpy computes the same tensors), and a mount of weights one
float apart gives a different answer, so the comparison can fail.
"""
import os
import sys

import numpy as np

TESTS_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path[:0] = [TESTS_DIR + "/fixtures", TESTS_DIR + "/servers"]
import stfstest as T  # noqa: E402
from fixtures import stfs, world  # noqa: E402
from onnxfix import (HIDDEN, TEXTS, VOCAB, expected, js_ready, run_js,  # noqa
                     tiny_bert_repo)
from repofix import S3World, write_tree  # noqa: E402


def differences(got, want, where=""):
    """The keys (paths) where two check.mjs outputs differ."""
    if isinstance(want, dict) and isinstance(got, dict):
        out = ["%s/%s: missing" % (where, k)
               for k in sorted(set(want) ^ set(got))]
        for k in sorted(set(want) & set(got)):
            out += differences(got[k], want[k], "%s/%s" % (where, k))
        return out
    if isinstance(want, list) and isinstance(got, list) and \
            len(want) == len(got):
        out = []
        for i, (g, w) in enumerate(zip(got, want)):
            out += differences(g, w, "%s[%d]" % (where, i))
        return out[:5]
    return [] if got == want else ["%s: %r != %r" % (
        where, str(got)[:80], str(want)[:80])]


def same(got, want):
    diff = differences(got, want)
    assert not diff, "transformers.js differs: %s" % "; ".join(diff[:10])


def same_both_ways(source, mnt, want):
    """transformers.js on %repo/ of a mount of source, then on the root of
    its -o repo mount (the mount point is the model directory)."""
    for opts, where in (((), "%repo"), (("-o", "repo"), "")):
        p = T.mount_fg(source, mnt, *opts)
        try:
            same(run_js(os.path.join(mnt, where) if where else mnt), want)
        finally:
            T.stop_fg(p, mnt)


def reference(d):
    """The source directory and what transformers.js makes of it,
    checked against the model's own arithmetic."""
    why = js_ready()
    assert why is None, why
    files = tiny_bert_repo()
    src = write_tree(os.path.join(d, "src"), files)
    want = run_js(src)
    assert want["config"]["model_type"] == "bert"
    assert want["config"]["vocab_size"] == len(VOCAB)
    assert len(want["encodings"]) == len(TEXTS)
    e = want["encodings"][0]
    assert e["tokens"] == ["the", "mount", "serves", "a", "model", "from",
                           "the", "hub", "."], e
    assert e["input_ids"] == [VOCAB.index(t) for t in
                              ["[CLS]"] + e["tokens"] + ["[SEP]"]]
    assert e["decoded"] == TEXTS[0].lower(), e
    assert 1 in want["pair"]["token_type_ids"], want["pair"]
    b = want["batch"]
    dims = b["input_ids"]["dims"]
    arr = lambda k: np.array(b[k]["data"]).reshape(dims)  # noqa: E731
    model = expected(arr("input_ids"), arr("token_type_ids"),
                     arr("attention_mask"))
    h = want["hidden"]
    assert h["dims"] == list(model.shape), (h["dims"], model.shape)
    got = np.array(h["data"], dtype=np.float32).reshape(h["dims"])
    assert np.allclose(got, model, atol=1e-5), np.abs(got - model).max()
    assert want["pooled"]["dims"] == [len(TEXTS), model.shape[-1]]
    return files, src, want


def test_local(d, mnt):
    files, src, want = reference(d)
    same_both_ways(src, mnt, want)


def test_changed_weights(d, mnt):
    """A mount of weights one float apart: a different answer, so a
    mount that served wrong bytes could not pass the tests above."""
    files, src, want = reference(d)
    data = bytearray(files["onnx/model.onnx_data"])
    i = VOCAB.index("hub") * HIDDEN * 4    # the word table comes first
    data[i:i + 4] = np.float32(3.5).tobytes()
    files["onnx/model.onnx_data"] = bytes(data)
    other = write_tree(os.path.join(d, "other"), files)
    p = T.mount_fg(other, mnt)
    try:
        got = run_js(os.path.join(mnt, "%repo"))
    finally:
        T.stop_fg(p, mnt)
    assert got["config"] == want["config"]
    assert got["encodings"] == want["encodings"]
    assert differences(got["hidden"], want["hidden"]), "no difference"
    try:
        same(got, want)
    except AssertionError as e:
        assert "/hidden/data[" in str(e), e
    else:
        raise AssertionError("one float apart and the same answer")


def test_hub(d, mnt):
    """hf://: the small files fetched and verified at mount, the ONNX
    graph and its data read lazily."""
    files, src, want = reference(d)
    with world(os.path.join(d, "w")) as w:
        w.hub.push(w.hub.repo("org/tiny-bert"), files)
        same_both_ways("hf://org/tiny-bert", mnt, want)
        r = stfs("inspect", "--files", "hf://org/tiny-bert")
        assert r.returncode == 0, r.stderr
        kinds = {x.split("\t")[0]: x.split("\t")[3]
                 for x in r.stdout.splitlines()}
        assert kinds["onnx/model.onnx_data"] == "lazy", kinds
        assert kinds["onnx/model.onnx"] == "lazy", kinds
        assert kinds["tokenizer.json"] == "small", kinds


def test_s3(d, mnt):
    files, src, want = reference(d)
    with S3World(os.path.join(d, "s3")) as s3:
        s3.put_tree("tiny-bert/", files)
        same_both_ways("s3://repos/tiny-bert/", mnt, want)


if __name__ == "__main__":
    sys.exit(T.run_tests([test_local, test_changed_weights, test_hub,
                          test_s3]))
