// check.mjs HUB_URL REPO REVISION [PATH]: what the official Hugging Face
// JavaScript client (@huggingface/hub) sees of a repo, as JSON on stdout:
// listFiles (recursive) and parseSafetensorsMetadata.  tests/remote/test_hub.py
// runs it against the tests' Hub emulator and compares with stfs.
import { listFiles, parseSafetensorsMetadata } from "@huggingface/hub";

const [hubUrl, name, revision, path] = process.argv.slice(2);
const repo = { type: "model", name };
const accessToken = process.env.HF_TOKEN || undefined;
const files = [];
for await (const f of listFiles({ repo, revision, hubUrl, recursive: true,
				 accessToken }))
	files.push({ type: f.type, path: f.path, size: f.size, oid: f.oid,
		     lfs: f.lfs ? f.lfs.oid : null });
const meta = await parseSafetensorsMetadata({ repo, revision, hubUrl, path,
					      accessToken,
					      computeParametersCount: true });
const tensors = {};
const headers = meta.sharded ? meta.headers : { [path || "model.safetensors"]: meta.header };
for (const [file, h] of Object.entries(headers))
	for (const [k, v] of Object.entries(h))
		if (k !== "__metadata__")
			tensors[k] = { file, dtype: v.dtype, shape: v.shape,
				       data_offsets: v.data_offsets };
console.log(JSON.stringify({ files, sharded: meta.sharded, tensors,
			     parameterCount: meta.parameterCount ?? null }));
