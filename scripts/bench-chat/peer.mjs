// Peer side of scripts/bench-chat: greedy decode speed of node-llama-cpp
// 3.21.1 (the same llama.cpp libraries modeld loads) on the same GGUF, with
// the same threads, context size and prompt tokens.
//
//   node peer.mjs --model M.gguf --threads 1 --ctx 1024 --tokens 256 --runs 5 --prompt TEXT
//
// Prints one JSON line on stdout: prompt token count, per-run decode tokens/s
// (tokens after the first / time after the first), per-run time to first
// token, their medians, and the generated ids of the first run.
import { parseArgs } from "node:util";
import { getLlama, LlamaLogLevel } from "node-llama-cpp";

const { values: a } = parseArgs({
  options: {
    model: { type: "string" },
    threads: { type: "string", default: "1" },
    ctx: { type: "string", default: "1024" },
    batch: { type: "string", default: "512" },
    tokens: { type: "string", default: "256" },
    runs: { type: "string", default: "5" },
    prompt: { type: "string", default: "Hello world, tell me a story about the water" },
  },
});
if (!a.model) {
  console.error("peer.mjs: --model is required");
  process.exit(2);
}
const threads = Number(a.threads);
const n = Number(a.tokens);
const runs = Number(a.runs);

const median = (xs) => [...xs].sort((x, y) => x - y)[Math.floor(xs.length / 2)];

const llama = await getLlama({ gpu: false, build: "never", maxThreads: threads, logLevel: LlamaLogLevel.error });
const model = await llama.loadModel({ modelPath: a.model, gpuLayers: 0 });
const context = await model.createContext({
  contextSize: Number(a.ctx),
  batchSize: Number(a.batch),
  sequences: 1,
  threads: { ideal: threads, min: threads },
});
const seq = context.getSequence();

// modeld tokenizes a completion prompt with the vocabulary's special tokens
// added (BOS for this model) and special markers not parsed: do the same.
const tokens = model.tokenize(a.prompt, false);
if (model.tokens.shouldPrependBosToken && model.tokens.bos != null) tokens.unshift(model.tokens.bos);

const decode = [];
const ttft = [];
let ids = null;
for (let r = 0; r < runs; r++) {
  await seq.clearHistory();
  const out = [];
  const start = performance.now();
  let first = 0;
  let last = 0;
  for await (const tok of seq.evaluate(tokens, { temperature: 0, yieldEogToken: true })) {
    last = performance.now();
    if (out.length === 0) first = last;
    out.push(tok);
    if (out.length >= n) break;
  }
  decode.push((out.length - 1) / ((last - first) / 1000));
  ttft.push(first - start);
  if (ids === null) ids = out;
}

console.log(JSON.stringify({
  peer: "node-llama-cpp",
  threads: context.currentThreads,
  context: context.contextSize,
  promptTokens: tokens.length,
  tokens: n,
  decode,
  ttftMs: ttft,
  decodeMedian: median(decode),
  ttftMedianMs: median(ttft),
  ids,
  text: model.detokenize(ids),
}));
await context.dispose();
await model.dispose();
await llama.dispose();
