// check.mjs PROMPT N FILE...: llama.cpp (node-llama-cpp's prebuilt CPU
// binary, never a build or a download) loads each GGUF FILE with mmap,
// tokenizes PROMPT and generates N tokens greedily (temperature 0, one
// thread). Prints JSON on stdout: for each FILE, in order, the prompt's
// token ids, the generated ids, whether llama.cpp used mmap and whether
// the file was mapped (/proc/self/maps) while the model was loaded.
// tests/loaders/test_llamajs.py compares a mount's %repo/ file with its source.
import { getLlama } from "node-llama-cpp";
import fs from "node:fs";
import path from "node:path";

const [prompt, n, ...files] = process.argv.slice(2);
const llama = await getLlama({
	gpu: false, build: "never", skipDownload: true,
	usePrebuiltBinaries: true, progressLogs: false, logLevel: "error",
	logger: (level, message) => process.stderr.write(`${level}: ${message}\n`),
});

function mapped(file) {
	const real = fs.realpathSync(file);
	return fs.readFileSync("/proc/self/maps", "utf8").split("\n")
		.some((line) => line.endsWith(" " + real));
}

async function run(file) {
	const model = await llama.loadModel({
		modelPath: path.resolve(file), useMmap: true, gpuLayers: 0,
	});
	const context = await model.createContext({
		contextSize: 128, batchSize: 128, threads: 1, sequences: 1,
	});
	const ids = model.tokenize(prompt);
	const input = model.tokens.bos != null ? [model.tokens.bos, ...ids] : ids;
	const out = [];
	const seq = context.getSequence();
	for await (const t of seq.evaluate(input, { temperature: 0 })) {
		out.push(t);
		if (out.length >= Number(n))
			break;
	}
	const res = {
		prompt: input, tokens: out, mmap: model.useMmap, mapped: mapped(file),
	};
	await context.dispose();
	await model.dispose();
	return res;
}

const results = [];
for (const f of files)
	results.push(await run(f));
await llama.dispose();
console.log(JSON.stringify(results));
