#!/usr/bin/env python3
"""test_pyloaders.py: the Python loaders people use read from the mount.

Runs in the venv scripts/deps.sh makes from tests/loaders/py-loaders/ (PyPI's
safetensors, transformers, tokenizers, huggingface_hub and
sentence-transformers, pinned with hashes, on Debian's torch 1.13 and
numpy): started by any python3, it runs itself again with the venv's
python, and fails (never skips) when the venv is missing or older than
tests/loaders/py-loaders/requirements.txt.

Three repositories are written by the libraries themselves, once a run:
- lm: a tiny Llama (transformers' save_pretrained, max_shard_size giving
  3 shards and model.safetensors.index.json) with a WordLevel tokenizer
  made with `tokenizers`;
- bin: the same model with only pytorch_model.bin;
- st: a sentence-transformers model (a tiny BERT, mean pooling,
  normalization: modules.json, 1_Pooling/, 2_Normalize/).
Each is mounted from a local directory, hf:// (the tests' Hub emulator)
and s3:// (the tests' Swift), through %repo/ and with -o repo, and:
- the reference `safetensors` (safe_open with framework "np" and "pt",
  safetensors.torch.load_file) reads every shard, the root's
  %model.safetensors and model/layers/0/%model.safetensors: every tensor
  and __metadata__ equal the source's (the virtual files' metadata as
  docs/virtual.md says);
- transformers' AutoConfig, AutoTokenizer and
  AutoModelForCausalLM.from_pretrained(path) (HF_HUB_OFFLINE=1): the same
  configuration, token ids and logits of a fixed prompt, bit for bit;
- SentenceTransformer(path): the same embeddings, bit for bit.
An https:// URL of the folder (nginx with a certificate made here) gives
the shards only (HTTP lists no folder): safetensors as above, and the
model built from the source's configuration with the mount's
%model.safetensors as its state dict gives the same logits.
A copy of each source with one byte of one tensor changed makes every
one of these comparisons fail (test_changed_byte).

huggingface_hub is the oracle of what a Hub repository holds
(test_hub_snapshot): snapshot_download from the emulator gives the paths,
sizes and bytes of %repo/, and the Hugging Face cache it wrote mounts
with HF_HUB_OFFLINE=1 and gives them too.
"""
import hashlib
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
VENV = os.path.join(HERE, "py-loaders", ".venv")


def into_venv():
    """Run this file with the venv's python (fail when it is missing or
    stale: the packages must be exactly the pinned ones)."""
    py = os.path.join(VENV, "bin", "python")
    if os.path.realpath(sys.prefix) == os.path.realpath(VENV):
        return
    req = os.path.join(HERE, "py-loaders", "requirements.txt")
    with open(req, "rb") as f:
        want = hashlib.sha256(f.read()).hexdigest() + "  -"
    try:
        with open(os.path.join(VENV, ".installed")) as f:
            have = f.read().strip()
    except OSError:
        have = None
    if not os.access(py, os.X_OK) or have != want:
        print("FAIL: the Python loaders' venv %s is %s: run scripts/deps.sh "
              "test" % (VENV, "missing or unfinished" if have is None else
                        "older than py-loaders/requirements.txt"))
        print("0 passed, 1 failed")
        sys.exit(1)
    os.execv(py, [py] + sys.argv)


if __name__ == "__main__":
    into_venv()

# the libraries read HF_HUB_OFFLINE once, at import: no Hub for them
os.environ["HF_HUB_OFFLINE"] = "1"
os.environ["TRANSFORMERS_VERBOSITY"] = "error"
os.environ["TOKENIZERS_PARALLELISM"] = "false"

import atexit  # noqa: E402
import json  # noqa: E402
import shutil  # noqa: E402
import struct  # noqa: E402
import subprocess  # noqa: E402

TESTS_DIR = os.path.dirname(HERE)
sys.path[:0] = [TESTS_DIR + "/fixtures", TESTS_DIR + "/servers"]
import hubemu  # noqa: E402
import numpy as np  # noqa: E402
import stfstest as T  # noqa: E402
from fixtures import Nginx, env, make_ca, make_cert, world  # noqa: E402
from repofix import S3World, tree  # noqa: E402

import torch  # noqa: E402
import safetensors  # noqa: E402
from safetensors import safe_open  # noqa: E402
from safetensors.torch import load_file  # noqa: E402
import transformers  # noqa: E402
from transformers import (AutoConfig, AutoModelForCausalLM,  # noqa: E402
                          AutoTokenizer)
import sentence_transformers  # noqa: E402
from sentence_transformers import SentenceTransformer  # noqa: E402
import huggingface_hub  # noqa: E402

transformers.utils.logging.disable_progress_bar()
torch.set_num_threads(1)        # the same sums in the same order, each run

WORDS = ("the mount serves a model from hub s3 and disk every tensor is "
         "read once by python loaders").split()
PROMPT = "the mount serves a model from the hub and every tensor is read"
TEXTS = ["the mount serves a model", "every tensor is read once",
         "python loaders read from disk and s3"]
# the subtree whose virtual file is read, and the tensor a changed byte
# is in (test_changed_byte)
SUB = {"lm": "model/layers/0", "st": "encoder/layer/0"}
CHANGED = {"lm": "model.layers.0.mlp.down_proj.weight",
           "st": "encoder.layer.0.attention.output.dense.weight"}
KINDS = ("lm", "bin", "st")

_fix = {}


# ---- the repositories, written by the libraries ------------------------

def _llama_tokenizer():
    from tokenizers import Tokenizer, models, pre_tokenizers, processors
    vocab = {w: i for i, w in enumerate(["<unk>", "<s>", "</s>"] + WORDS)}
    t = Tokenizer(models.WordLevel(vocab, unk_token="<unk>"))
    t.pre_tokenizer = pre_tokenizers.Whitespace()
    t.post_processor = processors.TemplateProcessing(
        single="<s> $A", special_tokens=[("<s>", 1)])
    return transformers.PreTrainedTokenizerFast(
        tokenizer_object=t, unk_token="<unk>", bos_token="<s>",
        eos_token="</s>")


def _bert_tokenizer():
    from tokenizers import Tokenizer, models, pre_tokenizers, processors
    vocab = {w: i for i, w in enumerate(
        ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"] + WORDS)}
    t = Tokenizer(models.WordPiece(vocab, unk_token="[UNK]"))
    t.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
    t.post_processor = processors.TemplateProcessing(
        single="[CLS] $A [SEP]", pair="[CLS] $A [SEP] $B:1 [SEP]:1",
        special_tokens=[("[CLS]", 2), ("[SEP]", 3)])
    return transformers.PreTrainedTokenizerFast(
        tokenizer_object=t, unk_token="[UNK]", pad_token="[PAD]",
        cls_token="[CLS]", sep_token="[SEP]", mask_token="[MASK]",
        model_max_length=64)


def sources():
    """{kind: source folder} of the three repositories (written once)."""
    if _fix:
        return _fix
    base = T.tmpdir()
    atexit.register(shutil.rmtree, base, True)
    torch.manual_seed(41)
    tok = _llama_tokenizer()
    cfg = transformers.LlamaConfig(
        vocab_size=len(tok), hidden_size=32, intermediate_size=64,
        num_hidden_layers=3, num_attention_heads=4, num_key_value_heads=2,
        max_position_embeddings=64, tie_word_embeddings=False)
    model = transformers.LlamaForCausalLM(cfg)
    lm, binr = os.path.join(base, "lm"), os.path.join(base, "bin")
    model.save_pretrained(lm, max_shard_size="40KB")
    tok.save_pretrained(lm)
    model.save_pretrained(binr, safe_serialization=False)
    tok.save_pretrained(binr)
    shards = [n for n in os.listdir(lm) if n.endswith(".safetensors")]
    assert len(shards) >= 3, shards
    assert os.path.isfile(os.path.join(lm, "model.safetensors.index.json"))
    assert sorted(n for n in os.listdir(binr) if "model" in n) == \
        ["pytorch_model.bin"], os.listdir(binr)
    # the sentence-transformers model: a tiny BERT and its tokenizer,
    # then the modules saved as sentence-transformers saves them
    bert = os.path.join(base, "bert")
    transformers.BertModel(transformers.BertConfig(
        vocab_size=len(WORDS) + 5, hidden_size=32, num_hidden_layers=2,
        num_attention_heads=4, intermediate_size=64,
        max_position_embeddings=64)).save_pretrained(bert)
    _bert_tokenizer().save_pretrained(bert)
    m = sentence_transformers.models
    st = os.path.join(base, "st")
    SentenceTransformer(modules=[
        m.Transformer(bert, max_seq_length=32), m.Pooling(32, "mean"),
        m.Normalize()], device="cpu").save(st, create_model_card=False)
    with open(os.path.join(st, "modules.json")) as f:
        mods = [x["path"] for x in json.load(f)]
    assert mods == ["", "1_Pooling", "2_Normalize"], mods
    _fix.update(lm=lm, bin=binr, st=st, base=base)
    return _fix


def files_of(root):
    """{relative path: bytes} of every file under root."""
    out = {}
    for dp, _, fns in os.walk(root):
        for n in fns:
            p = os.path.join(dp, n)
            with open(p, "rb") as f:
                out[os.path.relpath(p, root)] = f.read()
    return out


# ---- what each loader makes of a folder -------------------------------

def tensors_np(path):
    with safe_open(path, framework="np") as f:
        return f.metadata(), {k: f.get_tensor(k) for k in f.keys()}


def tensors_pt(path):
    with safe_open(path, framework="pt") as f:
        return f.metadata(), {k: f.get_tensor(k) for k in f.keys()}


def raw(t):
    """A tensor's dtype, shape and bytes (numpy or torch)."""
    if isinstance(t, torch.Tensor):
        return (str(t.dtype), tuple(t.shape),
                t.contiguous().view(-1).view(torch.uint8).numpy().tobytes())
    return str(t.dtype), t.shape, np.ascontiguousarray(t).tobytes()


def diff_tensors(got, want, what):
    """Differences of two {name: tensor}, as strings."""
    out = ["%s: %s missing or extra" % (what, n)
           for n in sorted(set(got) ^ set(want))]
    for n in sorted(set(got) & set(want)):
        if raw(got[n]) != raw(want[n]):
            out.append("%s: tensor %s differs" % (what, n))
    return out


def shard_names(folder):
    return sorted(n for n in os.listdir(folder)
                  if n.endswith(".safetensors"))


def virtual_metadata(src):
    """__metadata__ of a folder's %model.safetensors (docs/virtual.md):
    the entries every shard shares, then the index's metadata as
    strings (a number as its JSON text) unless a shard has the key."""
    metas = [tensors_np(os.path.join(src, n))[0] or {}
             for n in shard_names(src)]
    common = {k: v for k, v in metas[0].items()
              if all(m.get(k) == v for m in metas[1:])}
    idx = os.path.join(src, "model.safetensors.index.json")
    if os.path.isfile(idx):
        with open(idx) as f:
            for k, v in json.load(f).get("metadata", {}).items():
                if k not in common and all(k not in m for m in metas):
                    common[k] = v if isinstance(v, str) else json.dumps(v)
    return common or None


def safetensors_view(src, sub):
    """What the reference gives for the source: each shard (np, pt,
    load_file), and the tensors and metadata the root's and sub's
    virtual files must hold."""
    out = {"shards": {}, "subdir": sub}
    every = {}
    for n in shard_names(src):
        p = os.path.join(src, n)
        meta, t = tensors_np(p)
        out["shards"][n] = (meta, t, tensors_pt(p)[1], load_file(p))
        every.update(t)
    pre = sub.replace("/", ".") + "."
    out["root"] = (virtual_metadata(src), every)
    out["sub"] = (virtual_metadata(src),
                  {k: v for k, v in every.items() if k.startswith(pre)})
    return out


def diff_safetensors(repo, tensors, want):
    """Differences between what the reference reads from a mount (repo:
    its repository folder, tensors: its tensor tree) and want."""
    out = []
    assert shard_names(repo) == sorted(want["shards"]), (
        shard_names(repo), sorted(want["shards"]))
    for n, (meta, t_np, t_pt, t_lf) in sorted(want["shards"].items()):
        p = os.path.join(repo, n)
        got_meta, got = tensors_np(p)
        if got_meta != meta:
            out.append("%s: __metadata__ %r != %r" % (n, got_meta, meta))
        out += diff_tensors(got, t_np, n + " np")
        out += diff_tensors(tensors_pt(p)[1], t_pt, n + " pt")
        out += diff_tensors(load_file(p), t_lf, n + " load_file")
    if tensors is None:
        return out
    for key, rel in (("root", ""), ("sub", want["subdir"])):
        meta, t = want[key]
        p = os.path.join(tensors, rel, "%model.safetensors")
        got_meta, got = tensors_np(p)
        if got_meta != meta:
            out.append("%s: __metadata__ %r != %r" % (p, got_meta, meta))
        out += diff_tensors(got, t, p + " np")
        out += diff_tensors(tensors_pt(p)[1],
                            {k: torch.from_numpy(v.copy())
                             for k, v in t.items()}, p + " pt")
        out += diff_tensors(load_file(p), {k: torch.from_numpy(v.copy())
                                           for k, v in t.items()},
                            p + " load_file")
    return out


def config_dict(path):
    c = AutoConfig.from_pretrained(path).to_dict()
    c.pop("_name_or_path", None)
    return c


def causal_lm(path, config_from=None, state_dict=None):
    """Configuration, token ids and logits of PROMPT from a folder (or
    the model of config_from's configuration with state_dict)."""
    tok = AutoTokenizer.from_pretrained(config_from or path)
    ids = tok(PROMPT, return_tensors="pt")["input_ids"]
    if state_dict is None:
        model = AutoModelForCausalLM.from_pretrained(path)
    else:
        model = AutoModelForCausalLM.from_pretrained(
            None, config=AutoConfig.from_pretrained(config_from),
            state_dict=state_dict)
    model.eval()
    with torch.no_grad():
        logits = model(ids).logits
    return config_dict(config_from or path), ids, logits


def diff_lm(got, want):
    out = []
    if got[0] != want[0]:
        out.append("AutoConfig differs")
    if not torch.equal(got[1], want[1]):
        out.append("token ids %s != %s" % (got[1].tolist(), want[1].tolist()))
    if raw(got[2]) != raw(want[2]):
        out.append("logits differ (max %g)" %
                   (got[2] - want[2]).abs().max().item())
    return out


def embeddings(path):
    return SentenceTransformer(path, device="cpu").encode(
        TEXTS, convert_to_numpy=True)


def diff_st(got, want):
    if raw(got) != raw(want):
        return ["embeddings differ (max %g)" % np.abs(got - want).max()]
    return []


_refs = {}


def reference(kind, src):
    """What the loaders make of the source folder src, checked to be a
    model's output (once per folder)."""
    if src in _refs:
        return _refs[src]
    r = {}
    if kind == "lm":
        r["safetensors"] = safetensors_view(src, SUB[kind])
        assert len(r["safetensors"]["sub"][1]) >= 9
        r["lm"] = causal_lm(src)
    elif kind == "bin":
        r["lm"] = causal_lm(src)
    else:
        r["safetensors"] = safetensors_view(src, SUB[kind])
        assert len(r["safetensors"]["sub"][1]) >= 10
        r["st"] = embeddings(src)
        norms = np.linalg.norm(r["st"], axis=1)
        assert np.allclose(norms, 1, atol=1e-5), norms      # 2_Normalize
    if "lm" in r:
        assert r["lm"][2].shape == (1, r["lm"][1].shape[1], len(WORDS) + 3)
        assert r["lm"][1][0, 0].item() == 1     # <s>, then the words
    _refs[src] = r
    return r


def diff_all(kind, want, repo, tensors):
    """Every loader's differences between a mount (repo, tensors) and the
    reference want."""
    out = []
    if "safetensors" in want:
        out += diff_safetensors(repo, tensors, want["safetensors"])
    if "lm" in want:
        out += diff_lm(causal_lm(repo), want["lm"])
    if "st" in want:
        out += diff_st(embeddings(repo), want["st"])
    return out


def check_mounts(kind, source, src, mnt):
    """The loaders on source mounted with %repo/ and with -o repo give
    what they give on the folder src."""
    want = reference(kind, src)
    for opts in ((), ("-o", "repo")):
        p = T.mount_fg(source, mnt, *opts)
        try:
            if opts:
                repo, tensors = mnt, os.path.join(mnt, "%tensors")
            else:
                repo, tensors = os.path.join(mnt, "%repo"), mnt
            if kind == "bin":
                tensors = None
            diff = diff_all(kind, want, repo, tensors)
            assert not diff, "%s %s: %s" % (source, " ".join(opts) or
                                            "%repo/", "; ".join(diff[:8]))
        finally:
            T.stop_fg(p, mnt)


# ---- the tests ------------------------------------------------------------

def test_versions():
    """The pinned packages are the ones imported (and Debian's torch)."""
    pins = {}
    with open(os.path.join(HERE, "py-loaders", "requirements.txt")) as f:
        for line in f:
            if "==" in line:
                n, v = line.split()[0].split("==")
                pins[n.lower().replace("_", "-")] = v
    for mod, name in ((safetensors, "safetensors"),
                      (transformers, "transformers"),
                      (sentence_transformers, "sentence-transformers"),
                      (huggingface_hub, "huggingface-hub")):
        assert mod.__version__ == pins[name], (name, mod.__version__)
        assert os.path.realpath(mod.__file__).startswith(
            os.path.realpath(VENV)), mod.__file__
    assert torch.__file__.startswith("/usr/lib/python3/"), torch.__file__


def test_local(d, mnt):
    for kind in KINDS:
        src = sources()[kind]
        check_mounts(kind, src, src, mnt)


def one_byte_changed(kind, src, d):
    """A copy of src with one byte of one tensor changed (an exponent
    bit of a float in the middle of a layer-0 weight)."""
    other = os.path.join(d, kind)
    shutil.copytree(src, other)
    if kind == "bin":
        import zipfile
        p = os.path.join(other, "pytorch_model.bin")
        with zipfile.ZipFile(p) as z:
            sd = torch.load(p)
            names = [i for i in z.infolist() if "/data/" in i.filename]
            # the largest record is a weight matrix, stored uncompressed
            info = max(names, key=lambda i: i.file_size)
            assert info.compress_type == zipfile.ZIP_STORED
            assert info.file_size in [t.numel() * 4 for t in sd.values()]
        with open(p, "rb") as f:
            f.seek(info.header_offset + 26)
            n, m = struct.unpack("<HH", f.read(4))
        off = info.header_offset + 30 + n + m + info.file_size // 2 + 3
    else:
        name = CHANGED[kind]
        shard = "model.safetensors"
        if kind == "lm":
            with open(os.path.join(src, "model.safetensors.index.json")) as f:
                shard = json.load(f)["weight_map"][name]
        p = os.path.join(other, shard)
        with open(p, "rb") as f:
            hlen = struct.unpack("<Q", f.read(8))[0]
            a, b = json.loads(f.read(hlen))[name]["data_offsets"]
        off = 8 + hlen + (a + b) // 2 // 4 * 4 + 3
    with open(p, "r+b") as f:
        f.seek(off)
        byte = f.read(1)[0]
        f.seek(off)
        f.write(bytes([byte ^ 0x01]))
    return other


def test_changed_byte(d, mnt):
    """One byte changed in one shard: every comparison above fails on it
    (so none of them could pass a mount that served a wrong byte)."""
    for kind in KINDS:
        src = sources()[kind]
        want = reference(kind, src)
        other = one_byte_changed(kind, src, d)
        p = T.mount_fg(other, mnt)
        try:
            repo = os.path.join(mnt, "%repo")
            if "safetensors" in want:
                # the changed tensor, in its shard and in the root's and
                # the subtree's virtual files, by each reader
                shard = [n for n, v in want["safetensors"]["shards"].items()
                         if CHANGED[kind] in v[1]]
                where = shard + [os.path.join(mnt, v, "%model.safetensors")
                                 for v in ("", SUB[kind])]
                expect = sorted("%s %s: tensor %s differs" % (
                    w, how, CHANGED[kind]) for w in where
                    for how in ("np", "pt", "load_file"))
                diff = diff_safetensors(repo, mnt, want["safetensors"])
                assert sorted(diff) == expect, (kind, diff, expect)
            if "lm" in want:
                got = causal_lm(repo)
                diff = diff_lm(got, want["lm"])
                assert len(diff) == 1 and diff[0].startswith("logits"), diff
            if "st" in want:
                diff = diff_st(embeddings(repo), want["st"])
                assert len(diff) == 1, diff
        finally:
            T.stop_fg(p, mnt)


def test_https(d, mnt):
    """An https:// URL of the folder: the shards (nothing else is listed
    over HTTP) and their virtual files; the model of the source's
    configuration given the mount's %model.safetensors."""
    src = sources()["lm"]
    want = reference("lm", src)
    ca = make_ca(d)
    ngx = Nginx(os.path.join(d, "ngx"), sources()["base"],
                tls=make_cert(d, ca))
    try:
        with env(CURL_CA_BUNDLE=ca[0]):
            for opts in ((), ("-o", "repo")):
                p = T.mount_fg(ngx.url("lm/"), mnt, *opts)
                try:
                    repo = mnt if opts else os.path.join(mnt, "%repo")
                    tensors = os.path.join(mnt, "%tensors") if opts else mnt
                    diff = diff_safetensors(repo, tensors,
                                            want["safetensors"])
                    got = causal_lm(None, src, load_file(os.path.join(
                        tensors, "%model.safetensors")))
                    diff += diff_lm(got, want["lm"])
                    assert not diff, (opts, diff[:8])
                finally:
                    T.stop_fg(p, mnt)
    finally:
        ngx.stop()


def test_hub(d, mnt):
    with world(os.path.join(d, "w")) as w:
        for kind in KINDS:
            src = sources()[kind]
            w.hub.push(w.hub.repo("org/" + kind), files_of(src))
            check_mounts(kind, "hf://org/" + kind, src, mnt)


def test_s3(d, mnt):
    with S3World(os.path.join(d, "s3")) as s3:
        for kind in KINDS:
            src = sources()[kind]
            s3.put_tree(kind + "/", files_of(src))
            check_mounts(kind, "s3://repos/%s/" % kind, src, mnt)


# what the real client does against the Hub emulator, in a process of its
# own (huggingface_hub reads HF_ENDPOINT and HF_HUB_OFFLINE at import)
CLIENT = r"""
import json, os, sys
from huggingface_hub import HfApi, snapshot_download
rid, half = sys.argv[1], json.loads(sys.argv[2])
api = HfApi()
tree = [(e.path, e.size, e.lfs.sha256 if e.lfs else None)
        for e in api.list_repo_tree(rid, recursive=True)
        if hasattr(e, "size")]
info = api.model_info(rid)
# a download broken off halfway: the client goes on with a Range
if half:
    from huggingface_hub import constants
    blobs = os.path.join(constants.HF_HUB_CACHE,
                         "models--" + rid.replace("/", "--"), "blobs")
    os.makedirs(blobs, exist_ok=True)
    with open(os.path.join(blobs, half[0] + ".incomplete"), "wb") as f:
        f.write(bytes.fromhex(half[1]))
path = snapshot_download(rid, max_workers=8)
print(json.dumps({"tree": tree, "sha": info.sha, "path": path}))
"""


def test_hub_snapshot(d, mnt):
    """huggingface_hub's snapshot_download, tree listing and resumed
    download from the Hub emulator: what it fetched is %repo/ of
    hf://ORG/NAME, path for path, byte for byte; the cache it wrote
    mounts offline (not one request) and is the same again."""
    cache = os.path.join(d, "hub-cache")
    with world(os.path.join(d, "w")) as w:
        for kind in ("lm", "st"):
            rid = "org/" + kind
            src = sources()[kind]
            files = files_of(src)
            sha = w.hub.push(w.hub.repo(rid), files)
            big = max((p for p in files if p.endswith(".safetensors")),
                      key=lambda p: len(files[p]))
            cut = len(files[big]) // 2
            half = [hashlib.sha256(files[big]).hexdigest(),
                    files[big][:cut].hex()]
            e = dict(os.environ, HF_HUB_CACHE=cache)
            e.pop("HF_HUB_OFFLINE", None)
            r = subprocess.run([sys.executable, "-c", CLIENT, rid,
                                json.dumps(half)], env=e, timeout=120,
                               capture_output=True, text=True)
            assert r.returncode == 0, r.stderr[-2000:]
            got = json.loads(r.stdout.splitlines()[-1])
            assert got["sha"] == sha, (got["sha"], sha)
            assert got["path"] == os.path.join(
                cache, "models--org--" + kind, "snapshots", sha)
            snap = tree(got["path"])
            assert [x for x in snap if x[1] == "file"] == sorted(
                (p, "file", len(b), hashlib.sha256(b).hexdigest())
                for p, b in files.items()), kind
            # the tree API took pages (two entries each), a cursor each
            pages = w.hub.log.count(lambda x: x["path"].startswith(
                "/api/models/%s/tree/" % rid) and "cursor=" in x["path"])
            n = len(files) + len({os.path.dirname(p_) for p_ in files} -
                                 {""})
            assert pages == (n + hubemu.PAGE - 1) // hubemu.PAGE - 1, pages
            # the download broken off went on from its byte cut
            assert ("bytes=%d-" % cut) in w.nginx_log(), w.nginx_log()
            p = T.mount_fg("hf://" + rid, mnt)
            try:
                repo = os.path.join(mnt, "%repo")
                assert tree(repo) == snap, (kind, tree(repo), snap)
                listing = sorted((p_, os.path.getsize(os.path.join(
                    repo, p_)), l_) for p_, _, l_ in got["tree"])
                assert listing == sorted(
                    (p_, s_, hashlib.sha256(files[p_]).hexdigest()
                     if l_ else None) for p_, s_, l_ in got["tree"])
                assert sorted(p_ for p_, _, _ in got["tree"]) == \
                    sorted(files), (got["tree"], sorted(files))
            finally:
                T.stop_fg(p, mnt)
            # the cache, offline: no request, the same tree and models
            before = len(w.hub.seen)
            with env(HF_HUB_OFFLINE="1", HF_HUB_CACHE=cache):
                check_mounts(kind, "hf://" + rid, src, mnt)
                p = T.mount_fg("hf://" + rid, mnt, "-o", "repo")
                try:
                    assert [x for x in tree(mnt) if not x[0].startswith(
                        "%tensors")] == snap
                finally:
                    T.stop_fg(p, mnt)
            assert len(w.hub.seen) == before, w.hub.seen[before:]


if __name__ == "__main__":
    sys.exit(T.run_tests([test_versions, test_local, test_changed_byte,
                          test_https, test_hub, test_hub_snapshot,
                          test_s3]))
