// check.mjs FILE: what an independent GGUF parser (@huggingface/gguf) sees
// of a local GGUF file, as JSON on stdout: the data section's offset, and
// each tensor's ggml type id, dimensions (as stored, innermost first) and
// offset in the data section; the metadata with typed values.
// tests/mount/test_gguf.py compares it with stfs's view of the same file.
import { gguf } from "@huggingface/gguf";
import path from "node:path";

const file = path.resolve(process.argv[2]);
const out = await gguf(file, { allowLocalFile: true, typedMetadata: true });
const big = (_, v) => (typeof v === "bigint" ? v.toString() : v);
console.log(JSON.stringify({
	version: Number(out.metadata.version),
	tensorDataOffset: out.tensorDataOffset.toString(),
	tensors: out.tensorInfos.map((t) => ({
		name: t.name, type: t.dtype,
		dims: t.shape.map((d) => d.toString()),
		offset: t.offset.toString(),
	})),
	metadata: Object.fromEntries(Object.entries(out.typedMetadata)
		.map(([k, v]) => [k, { type: v.type, value: v.value }])),
}, big));
