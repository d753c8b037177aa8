#!/usr/bin/env python3
"""test_llamajs.py: llama.cpp (node-llama-cpp's prebuilt CPU binary,
tests/loaders/llamajs) loads a GGUF from a mount's %repo/ with mmap and generates
the same tokens as from the source directory.

The model is a tiny llama-architecture GGUF the tests write
(tests/fixtures/llamafix.py); check.mjs loads each file with mmap, generates 8
tokens greedily from a fixed prompt, and says whether the file was
mapped.  One node process per source:
- a local directory: the source file, %repo/model.gguf, the same file at
  the root of a `-o repo` mount, and a copy of the source with one wrong
  byte, which must give other tokens (the comparison can fail);
- hf:// (the tests' Hub emulator, the GGUF an LFS file, read lazily);
- s3:// (the tests' S3 server, Swift with s3api).
"""
import os
import sys

TESTS_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path[:0] = [TESTS_DIR + "/fixtures", TESTS_DIR + "/servers"]
import llamafix as L  # noqa: E402
import stfstest as T  # noqa: E402
from fixtures import world  # noqa: E402
from repofix import S3World, write_tree  # noqa: E402

README = b"---\nlibrary_name: llama.cpp\n---\n# a tiny llama\n"


def repo(d):
    """The repository (the model and a README) written to d/src: its
    folder, the model's path, {path: bytes}, the tensors' places."""
    src = os.path.join(d, "src")
    os.makedirs(src)
    model = os.path.join(src, "model.gguf")
    data, where = L.write_model(model)
    with open(os.path.join(src, "README.md"), "wb") as f:
        f.write(README)
    return src, model, {"model.gguf": data, "README.md": README}, where


def same(res, where):
    """Every result of res equals the first's tokens, each file mmapped."""
    want = res[0]
    assert len(want["tokens"]) == L.N_TOKENS, want
    assert want["prompt"] == L.prompt_ids(), want
    for r, w in zip(res, where):
        assert r["mmap"] and r["mapped"], (w, r)
        assert r["prompt"] == want["prompt"], (w, r, want)
        assert r["tokens"] == want["tokens"], (w, r, want)


def test_local(d, mnt):
    src, model, data, where = repo(d)
    bad = write_tree(os.path.join(d, "bad"), {
        "model.gguf": L.wrong_byte(data["model.gguf"], where)})
    bad = os.path.join(bad, "model.gguf")
    root = os.path.join(d, "root")
    os.mkdir(root)
    p = T.mount_fg(src, mnt)
    try:
        q = T.mount_fg(src, root, "-o", "repo")
        try:
            paths = [model, os.path.join(mnt, "%repo", "model.gguf"),
                     os.path.join(root, "model.gguf"), bad]
            res = L.run_check(paths)
        finally:
            T.stop_fg(q, root)
    finally:
        T.stop_fg(p, mnt)
    same(res[:3], paths[:3])
    assert res[3]["prompt"] == res[0]["prompt"], res
    assert res[3]["tokens"] != res[0]["tokens"], \
        "one wrong byte gave the same tokens: the comparison is blind"


def test_hub(d, mnt):
    src, model, data, _ = repo(d)
    with world(d) as w:
        w.hub.push(w.hub.repo("org/tiny-llama"), data)
        p = T.mount_fg("hf://org/tiny-llama", mnt)
        try:
            paths = [model, os.path.join(mnt, "%repo", "model.gguf")]
            same(L.run_check(paths), paths)
        finally:
            T.stop_fg(p, mnt)


def test_s3(d, mnt):
    src, model, data, _ = repo(d)
    with S3World(d) as s3:
        s3.put_tree("llama/", data)
        p = T.mount_fg("s3://repos/llama/", mnt)
        try:
            paths = [model, os.path.join(mnt, "%repo", "model.gguf")]
            same(L.run_check(paths), paths)
        finally:
            T.stop_fg(p, mnt)


if __name__ == "__main__":
    sys.exit(T.run_tests([test_local, test_hub, test_s3]))
