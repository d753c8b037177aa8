// check.mjs ROOT NAME TEXT...: what transformers.js makes of the model
// directory ROOT/NAME, read from the disk only (env.localModelPath = ROOT,
// no remote models, no cache written; ROOT "-": NAME is the directory's
// path, as for a name that is no model id, "%repo"), as JSON on stdout:
// AutoConfig's
// config, AutoTokenizer's encodings and decodings of each TEXT (and of
// the first two as a pair), and the feature-extraction pipeline's tensors
// (onnxruntime-node running onnx/model.onnx with its external data, by
// path) unpooled and mean-pooled normalized.  tests/loaders/test_transformersjs.py
// runs it on a source directory and on a mount of it and compares.
import { AutoConfig, AutoTokenizer, env, pipeline }
	from "@huggingface/transformers";

const [root, name, ...texts] = process.argv.slice(2);
if (root !== "-")
	env.localModelPath = root;
env.allowLocalModels = true;
env.allowRemoteModels = false;
env.useFSCache = false;
env.useWasmCache = false;

const plain = (t) => ({ dims: t.dims, type: t.type,
	data: Array.from(t.data, (v) => (typeof v === "bigint" ? Number(v) : v)) });

const config = await AutoConfig.from_pretrained(name);
const tok = await AutoTokenizer.from_pretrained(name);
const encodings = texts.map((text) => {
	const e = tok(text);
	const ids = Array.from(e.input_ids.data, Number);
	return {
		input_ids: ids,
		attention_mask: Array.from(e.attention_mask.data, Number),
		token_type_ids: Array.from(e.token_type_ids.data, Number),
		tokens: tok.tokenize(text),
		decoded: tok.decode(ids, { skip_special_tokens: true }),
	};
});
const p = tok(texts[0], { text_pair: texts[1] });
const pair = { input_ids: Array.from(p.input_ids.data, Number),
	token_type_ids: Array.from(p.token_type_ids.data, Number) };
const batch = tok(texts, { padding: true });
const extract = await pipeline("feature-extraction", name,
	{ device: "cpu", dtype: "fp32" });
const hidden = await extract(texts, { pooling: "none" });
const pooled = await extract(texts, { pooling: "mean", normalize: true });
console.log(JSON.stringify({
	config: JSON.parse(JSON.stringify(config)),
	encodings,
	pair,
	batch: { input_ids: plain(batch.input_ids),
		attention_mask: plain(batch.attention_mask),
		token_type_ids: plain(batch.token_type_ids) },
	hidden: plain(hidden),
	pooled: plain(pooled),
}));
await extract.dispose();
