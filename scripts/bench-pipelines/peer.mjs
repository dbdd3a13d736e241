// Peer side of scripts/bench-pipelines: transformers.js (the version pinned in
// package.json) running pipeline('feature-extraction') with mean pooling and
// normalize on the benchmark model, offline, on ONNX Runtime's CPU provider with
// the given intra-op threads.
//
//   node peer.mjs --model DIR --texts texts.json [--threads 2] [--calls 8]
//
// The Go half (bench-pipelines bench) starts it and drives it over stdin, one
// command per line, so that its runs interleave with modeld's; every answer is
// one JSON line on stdout:
//
//   (start)     {"ready": true, "transformers_js": "4.3.1", "threads": 2, "load_ms": …}
//   first       {"first": [the vector of texts[0]]}
//   batch       {"rate": embeddings/s of --calls sequential calls with 32 texts each}
//   concurrent  {"rate": embeddings/s of 32 callers each making --calls single-text
//               calls at once (onnxruntime-node runs them one after another)}
import fs from 'node:fs';
import path from 'node:path';
import readline from 'node:readline';
import { parseArgs } from 'node:util';
import { env, pipeline } from '@huggingface/transformers';

const { values: a } = parseArgs({
    options: {
        model: { type: 'string' },
        texts: { type: 'string' },
        threads: { type: 'string', default: '2' },
        calls: { type: 'string', default: '8' },
        batch: { type: 'string', default: '32' },
        concurrency: { type: 'string', default: '32' },
    },
});
if (!a.model || !a.texts) {
    console.error('usage: node peer.mjs --model DIR --texts texts.json [--threads N] [--calls C]');
    process.exit(2);
}
const threads = Number(a.threads), calls = Number(a.calls);
const batch = Number(a.batch), concurrency = Number(a.concurrency);
const texts = JSON.parse(fs.readFileSync(a.texts, 'utf8'));

const modelDir = path.resolve(a.model);
env.allowRemoteModels = false;
env.localModelPath = path.dirname(modelDir) + path.sep;

const t0 = performance.now();
const fe = await pipeline('feature-extraction', path.basename(modelDir), {
    dtype: 'fp32',
    device: 'cpu',
    session_options: { intraOpNumThreads: threads },
});
const loadMs = performance.now() - t0;
const opts = { pooling: 'mean', normalize: true };

// batchTexts is call i's batch: a window over the texts, so that calls differ
// (the Go half takes the same windows).
const batchTexts = (i) => Array.from({ length: batch }, (_, j) => texts[(i * batch + j) % texts.length]);
const seconds = (t) => (performance.now() - t) / 1000;

async function batchRun() {
    const t = performance.now();
    for (let i = 0; i < calls; i++) {
        const out = await fe(batchTexts(i), opts);
        if (out.dims[0] !== batch) throw new Error(`got ${out.dims[0]} vectors, want ${batch}`);
    }
    return (calls * batch) / seconds(t);
}

async function concurrentRun() {
    const t = performance.now();
    await Promise.all(Array.from({ length: concurrency }, async (_, c) => {
        for (let i = 0; i < calls; i++) {
            const out = await fe([texts[(c + i * concurrency) % texts.length]], opts);
            if (out.dims[0] !== 1) throw new Error(`got ${out.dims[0]} vectors, want 1`);
        }
    }));
    return (calls * concurrency) / seconds(t);
}

await fe(texts, opts); // warm-up: ORT sizes its arenas on the first runs
const say = (obj) => process.stdout.write(JSON.stringify(obj) + '\n');
say({ ready: true, transformers_js: env.version, threads, load_ms: loadMs });

for await (const cmd of readline.createInterface({ input: process.stdin })) {
    try {
        switch (cmd.trim()) {
        case 'first':
            say({ first: Array.from((await fe([texts[0]], opts)).data, Number) });
            break;
        case 'batch':
            say({ rate: await batchRun() });
            break;
        case 'concurrent':
            say({ rate: await concurrentRun() });
            break;
        case 'quit':
            process.exit(0);
            break;
        default:
            say({ error: `unknown command ${JSON.stringify(cmd)}` });
        }
    } catch (e) {
        say({ error: String(e?.stack ?? e) });
    }
}
