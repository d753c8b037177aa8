"""repofix.py: fixtures of the %repo/ tests (test_repo.py): repositories
as frameworks lay them out (diffusers' component folders, a
sentence-transformers model), written by the tests themselves, and the
comparison of a directory tree with another, byte for byte."""
import hashlib
import io
import json
import os
import struct

import numpy as np


def st_bytes(tensors, metadata=None):
    """A safetensors file of tensors ({name: numpy array}) as bytes."""
    dt = {np.dtype("float32"): "F32", np.dtype("float16"): "F16",
          np.dtype("int64"): "I64"}
    hdr, off, data = {}, 0, b""
    for name in sorted(tensors):
        a = np.ascontiguousarray(tensors[name])
        b = a.tobytes()
        hdr[name] = {"dtype": dt[a.dtype], "shape": list(a.shape),
                     "data_offsets": [off, off + len(b)]}
        off += len(b)
        data += b
    if metadata:
        hdr["__metadata__"] = metadata
    h = json.dumps(hdr, separators=(",", ":")).encode()
    h += b" " * (-len(h) % 8)
    return struct.pack("<Q", len(h)) + h + data


def _arrays(seed, names, shape=(16, 8)):
    rng = np.random.default_rng(seed)
    return {n: rng.standard_normal(shape).astype(np.float32) for n in names}


def torch_bin(tensors):
    """A PyTorch checkpoint (torch.save, the zip layout) as bytes."""
    import torch
    buf = io.BytesIO()
    torch.save({k: torch.from_numpy(v) for k, v in tensors.items()}, buf)
    return buf.getvalue()


def diffusers_repo():
    """{path: bytes} of a diffusers pipeline: model_index.json at the top,
    no weights there, a folder per component."""
    j = lambda o: json.dumps(o, indent=2).encode()  # noqa: E731
    return {
        "model_index.json": j({"_class_name": "StableDiffusionPipeline",
                               "unet": ["diffusers", "UNet2DConditionModel"],
                               "vae": ["diffusers", "AutoencoderKL"]}),
        "README.md": b"# a tiny pipeline\n",
        "scheduler/scheduler_config.json": j({"num_train_timesteps": 10}),
        "unet/config.json": j({"in_channels": 4}),
        "unet/diffusion_pytorch_model.safetensors": st_bytes(
            _arrays(1, ["conv_in.weight", "conv_out.weight"])),
        "vae/config.json": j({"latent_channels": 4}),
        "vae/diffusion_pytorch_model.safetensors": st_bytes(
            _arrays(2, ["decoder.conv_in.weight", "encoder.conv_in.weight"])),
        "tokenizer/vocab.json": j({"a": 0, "b": 1}),
        "tokenizer/merges.txt": b"#version: 0.2\na b\n",
    }


def st_model_repo():
    """{path: bytes} of a sentence-transformers model: safetensors and
    .bin weights, the tokenizer, modules.json and 1_Pooling/."""
    j = lambda o: json.dumps(o, indent=2).encode()  # noqa: E731
    w = _arrays(3, ["embeddings.word_embeddings.weight",
                    "encoder.layer.0.attention.self.query.weight"])
    return {
        "config.json": j({"architectures": ["BertModel"], "hidden_size": 8}),
        "config_sentence_transformers.json": j({"__version__": {}}),
        "modules.json": j([{"idx": 0, "name": "0", "path": "",
                            "type": "sentence_transformers.models.Transformer"},
                           {"idx": 1, "name": "1", "path": "1_Pooling",
                            "type": "sentence_transformers.models.Pooling"}]),
        "1_Pooling/config.json": j({"word_embedding_dimension": 8}),
        "tokenizer.json": j({"version": "1.0", "model": {"type": "WordPiece"}}),
        "tokenizer_config.json": j({"do_lower_case": True}),
        "special_tokens_map.json": j({"cls_token": "[CLS]"}),
        "vocab.txt": b"[PAD]\n[CLS]\n[SEP]\nhello\n",
        "sentence_bert_config.json": j({"max_seq_length": 128}),
        "model.safetensors": st_bytes(w, {"format": "pt"}),
        "pytorch_model.bin": torch_bin(w),
        "README.md": b"---\nlibrary_name: sentence-transformers\n---\n",
        "2_Normalize/.gitkeep": b"",
    }


def write_tree(d, files):
    """Write {path: bytes} under d."""
    for p, b in files.items():
        fp = os.path.join(d, p)
        os.makedirs(os.path.dirname(fp), exist_ok=True)
        with open(fp, "wb") as f:
            f.write(b)
    return d


def tree(root):
    """What `ls -R` and `sha256sum` say of every file under root: sorted
    (path, kind, size, sha256) tuples, folders included."""
    out = []
    for dp, dns, fns in os.walk(root):
        rel = os.path.relpath(dp, root)
        for n in dns:
            out.append((os.path.normpath(os.path.join(rel, n)), "dir", 0, ""))
        for n in fns:
            fp = os.path.join(dp, n)
            with open(fp, "rb") as f:
                h = hashlib.sha256(f.read()).hexdigest()
            out.append((os.path.normpath(os.path.join(rel, n)), "file",
                        os.path.getsize(fp), h))
    return sorted(out)


def tree_of(files):
    """The same for {path: bytes}."""
    out, dirs = [], set()
    for p, b in files.items():
        parts = p.split("/")
        for i in range(1, len(parts)):
            dirs.add("/".join(parts[:i]))
        out.append((p, "file", len(b), hashlib.sha256(b).hexdigest()))
    return sorted(out + [(x, "dir", 0, "") for x in dirs])


class S3World:
    """The tests' S3 server (Swift with s3api, tests/s3server.py) with a
    bucket "repos", and an environment of a signed client of it."""

    def __init__(self, d):
        import s3server
        from fixtures import env
        self.sw = s3server.Swift(os.path.join(d, "swift"))
        self.sw.bucket("repos")
        self.env = env(AWS_ENDPOINT_URL=self.sw.endpoint,
                       AWS_ENDPOINT_URL_S3=None,
                       AWS_ACCESS_KEY_ID=s3server.ACCESS,
                       AWS_SECRET_ACCESS_KEY=s3server.SECRET,
                       AWS_SESSION_TOKEN=None, AWS_REGION=None,
                       AWS_DEFAULT_REGION=None, AWS_PROFILE=None,
                       AWS_SHARED_CREDENTIALS_FILE=os.path.join(d, "no"),
                       AWS_CONFIG_FILE=os.path.join(d, "no"),
                       XDG_CACHE_HOME=os.path.join(d, "xdg"))
        self.env.__enter__()

    def put_tree(self, prefix, files, modes=None):
        """Each file under prefix; modes {path: "MODE,..."}: what the
        server's s3extras middleware (tests/swift/s3extras.py) answers for
        it (its checksums, its encryption)."""
        for p, b in sorted(files.items()):
            m = (modes or {}).get(p)
            self.sw.put("repos", prefix + p, b,
                        headers={"x-amz-meta-s3x": m} if m else None)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.env.__exit__(None, None, None)
        self.sw.stop()
