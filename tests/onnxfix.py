"""onnxfix.py: a tiny BERT-like model as transformers.js loads it, written
by the tests (test_transformersjs.py): config.json, a WordPiece
tokenizer.json and tokenizer_config.json written by hand, and
onnx/model.onnx with its weights in onnx/model.onnx_data (external data,
written with Debian's python3-onnx); what the graph computes, in numpy;
and the run of tests/transformersjs/check.mjs on a directory."""
import json
import os
import re
import shutil
import subprocess
import tempfile

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
TFJS = os.path.join(HERE, "transformersjs")
SPECIAL = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
WORDS = ["the", "mount", "serves", "a", "model", "from", "hub", "s3",
         "local", "disk", "bytes", "weights", "lazy", "read", "every",
         "file", "token", "##s", "##ing", "##ed", "serve", "load", ",",
         ".", "!", "?"]
VOCAB = SPECIAL + WORDS
HIDDEN = 1024       # the table is 124 KiB: a lazy file, not a small one
TEXTS = ["The mount serves a model from the hub.",
         "Every file, read lazy: weights loading!",
         "s3 bytes served from local disk?",
         "unknown wordz here"]


def tables(seed=7):
    """The word and token-type embedding tables, float32."""
    rng = np.random.default_rng(seed)
    return (rng.standard_normal((len(VOCAB), HIDDEN)).astype(np.float32),
            rng.standard_normal((2, HIDDEN)).astype(np.float32))


def expected(ids, types, mask):
    """What the graph gives: tanh(E[ids] + T[types]) * mask, [b, s, H]."""
    e, t = tables()
    ids, types = np.asarray(ids), np.asarray(types)
    m = np.asarray(mask, dtype=np.float32)[..., None]
    return np.tanh(e[ids] + t[types]) * m


def _onnx_model():
    import onnx
    from onnx import TensorProto, helper, numpy_helper
    e, t = tables()
    dyn = ["batch_size", "sequence_length"]
    inputs = [helper.make_tensor_value_info(n, TensorProto.INT64, dyn)
              for n in ("input_ids", "attention_mask", "token_type_ids")]
    out = helper.make_tensor_value_info(
        "last_hidden_state", TensorProto.FLOAT, dyn + [HIDDEN])
    axes = numpy_helper.from_array(np.array([-1], dtype=np.int64), "axes")
    nodes = [
        helper.make_node("Gather", ["word_embeddings", "input_ids"], ["w"]),
        helper.make_node("Gather", ["token_type_embeddings",
                                    "token_type_ids"], ["t"]),
        helper.make_node("Add", ["w", "t"], ["s"]),
        helper.make_node("Tanh", ["s"], ["h"]),
        helper.make_node("Cast", ["attention_mask"], ["mf"],
                         to=TensorProto.FLOAT),
        helper.make_node("Unsqueeze", ["mf", "axes"], ["m"]),
        helper.make_node("Mul", ["h", "m"], ["last_hidden_state"]),
    ]
    graph = helper.make_graph(
        nodes, "tiny_bert", inputs, [out],
        [numpy_helper.from_array(e, "word_embeddings"),
         numpy_helper.from_array(t, "token_type_embeddings"), axes])
    model = helper.make_model(graph, producer_name="stfs-tests",
                              opset_imports=[helper.make_opsetid("", 13)])
    onnx.checker.check_model(model)
    return model


def _onnx_files():
    """onnx/model.onnx and onnx/model.onnx_data as onnx.save_model writes
    them (external data, one file: both tables; the axes stay inline)."""
    import onnx
    tmp = tempfile.mkdtemp(prefix="stfs-onnx-")
    try:
        path = os.path.join(tmp, "model.onnx")
        onnx.save_model(_onnx_model(), path, save_as_external_data=True,
                        all_tensors_to_one_file=True,
                        location="model.onnx_data", size_threshold=1024)
        out = {}
        for n in ("model.onnx", "model.onnx_data"):
            with open(os.path.join(tmp, n), "rb") as f:
                out["onnx/" + n] = f.read()
        return out
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def _tokenizer():
    special = [{"id": VOCAB.index(s), "content": s, "single_word": False,
                "lstrip": False, "rstrip": False, "normalized": False,
                "special": True} for s in SPECIAL]

    def tok(name, type_id):
        return {"SpecialToken": {"id": name, "type_id": type_id}}

    def seq(name, type_id):
        return {"Sequence": {"id": name, "type_id": type_id}}
    return {
        "version": "1.0", "truncation": None, "padding": None,
        "added_tokens": special,
        "normalizer": {"type": "BertNormalizer", "clean_text": True,
                       "handle_chinese_chars": True, "strip_accents": None,
                       "lowercase": True},
        "pre_tokenizer": {"type": "BertPreTokenizer"},
        "post_processor": {
            "type": "TemplateProcessing",
            "single": [tok("[CLS]", 0), seq("A", 0), tok("[SEP]", 0)],
            "pair": [tok("[CLS]", 0), seq("A", 0), tok("[SEP]", 0),
                     seq("B", 1), tok("[SEP]", 1)],
            "special_tokens": {
                s: {"id": s, "ids": [VOCAB.index(s)], "tokens": [s]}
                for s in ("[CLS]", "[SEP]")}},
        "decoder": {"type": "WordPiece", "prefix": "##", "cleanup": True},
        "model": {"type": "WordPiece", "unk_token": "[UNK]",
                  "continuing_subword_prefix": "##",
                  "max_input_chars_per_word": 100,
                  "vocab": {w: i for i, w in enumerate(VOCAB)}},
    }


def tiny_bert_repo():
    """{path: bytes} of the model as a Hub repository holds it."""
    j = lambda o: json.dumps(o, indent=2).encode()  # noqa: E731
    files = {
        "config.json": j({
            "architectures": ["BertModel"], "model_type": "bert",
            "hidden_size": HIDDEN, "vocab_size": len(VOCAB),
            "type_vocab_size": 2, "num_hidden_layers": 0,
            "num_attention_heads": 1, "max_position_embeddings": 64,
            "pad_token_id": 0,
            "transformers.js_config": {"use_external_data_format": True,
                                       "dtype": "fp32"}}),
        "tokenizer.json": j(_tokenizer()),
        "tokenizer_config.json": j({
            "tokenizer_class": "BertTokenizer", "do_lower_case": True,
            "model_max_length": 64, "clean_up_tokenization_spaces": True,
            "cls_token": "[CLS]", "sep_token": "[SEP]",
            "pad_token": "[PAD]", "unk_token": "[UNK]",
            "mask_token": "[MASK]"}),
        "special_tokens_map.json": j({"cls_token": "[CLS]",
                                      "sep_token": "[SEP]",
                                      "pad_token": "[PAD]",
                                      "unk_token": "[UNK]",
                                      "mask_token": "[MASK]"}),
        "vocab.txt": ("\n".join(VOCAB) + "\n").encode(),
        "README.md": b"---\nlibrary_name: transformers.js\n---\n",
    }
    files.update(_onnx_files())
    return files


def js_ready():
    """Why check.mjs cannot run here (no node, or npm ci not run), or
    None when it can."""
    if not shutil.which("node"):
        return "node is not installed (scripts/deps.sh)"
    if not os.path.isdir(os.path.join(TFJS, "node_modules", "@huggingface",
                                      "transformers")):
        return "npm ci was not run in %s (scripts/deps.sh)" % TFJS
    return None


def run_js(path):
    """What transformers.js makes of the model directory path, as the
    JSON tests/transformersjs/check.mjs prints: the config, the
    tokenizer's encodings and decodings of TEXTS, the feature-extraction
    pipeline's tensors (unpooled, and mean-pooled normalized).  A folder
    whose name could be a model id is named so, under env.localModelPath
    (its parent); another ("%repo") by its whole path, as transformers.js
    takes a name that is no model id."""
    path = os.path.abspath(path)
    base = os.path.basename(path)
    where = [os.path.dirname(path), base] if re.fullmatch(
        r"[A-Za-z0-9][A-Za-z0-9._-]*", base) and ".." not in base and \
        "--" not in base else ["-", path]
    r = subprocess.run(["node", os.path.join(TFJS, "check.mjs")] + where
                       + TEXTS, capture_output=True, text=True,
                       timeout=120, cwd=TFJS)
    assert r.returncode == 0, "check.mjs %s: %s" % (path, r.stderr[-2000:])
    return json.loads(r.stdout)
