// Writes the pipeline goldens modeld's Go tests compare against, by running
// transformers.js (the version pinned in package.json) offline on the committed
// test models in testdata/onnx.
//
//   cd scripts/goldens/pipelines
//   npm install --ignore-scripts --no-package-lock   # onnxruntime-node's binding ships in its tarball
//   node make-goldens.mjs [SECTION...]               # writes testdata/onnx/goldens/*.json (all sections, or those named)
//
// transformers.js 4.3.1 has no beam search of its own (with num_beams > 1 its
// generate() keeps only the best candidate of one beam, i.e. greedy search), so the
// beam goldens come from beamSearch() below: Hugging Face transformers'
// BeamSearchScorer algorithm written out here, driven by transformers.js forward
// passes (whole decoder sequence each step, no KV cache) and transformers.js's own
// logits processors.
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import {
    env, pipeline, AutoTokenizer, AutoModelForSequenceClassification, AutoModelForSeq2SeqLM, AutoProcessor, CLIPVisionModelWithProjection, RawImage, Tensor,
} from '@huggingface/transformers';

const here = path.dirname(fileURLToPath(import.meta.url));
const modelsDir = path.resolve(here, '..', '..', '..', 'testdata', 'onnx');
const outDir = path.join(modelsDir, 'goldens');
env.allowRemoteModels = false;
env.localModelPath = modelsDir + path.sep;
const load = { dtype: 'fp32', device: 'cpu' };
const version = JSON.parse(fs.readFileSync(path.join(here, 'node_modules', '@huggingface', 'transformers', 'package.json'))).version;

const TEXTS = [
    'hello world',
    'The quick brown fox jumps over the lazy dog.',
    'I love this movie, it is wonderful!',
    'terrible awful film, very bad',
    'Paris is the capital of France.',
    'Café naïve résumé — déjà vu',
    '東京 is in Japan 😀',
    'Score: 3-2, win!!! (football)',
    'the weather today is sunny and hot, '.repeat(20).trim(),
];

function write(name, obj) {
    fs.mkdirSync(outDir, { recursive: true });
    fs.writeFileSync(path.join(outDir, name), JSON.stringify({ transformers_js: version, ...obj }, null, 1) + '\n');
    console.log('wrote', path.join(outDir, name));
}

const arr = (t) => Array.from(t.data, Number);
const rows = (t) => {
    const [n, d] = t.dims;
    return Array.from({ length: n }, (_, i) => Array.from(t.data.slice(i * d, (i + 1) * d), Number));
};

async function embeddings() {
    const cases = [];
    for (const model of ['embed-mean', 'embed-cls']) {
        const tok = await AutoTokenizer.from_pretrained(model);
        const fe = await pipeline('feature-extraction', model, load);
        const ids = TEXTS.map((t) => arr(tok(t, { truncation: true }).input_ids));
        for (const pooling of ['mean', 'cls', 'last_token']) {
            for (const normalize of [false, true]) {
                let vectors;
                if (pooling === 'last_token') {
                    // transformers.js takes the last padded position: one text per call.
                    vectors = [];
                    for (const t of TEXTS) vectors.push(rows(await fe([t], { pooling, normalize }))[0]);
                } else {
                    vectors = rows(await fe(TEXTS, { pooling, normalize }));
                }
                cases.push({ model, pooling, normalize, vectors });
            }
        }
        cases.push({ model, input_ids: ids });
    }
    write('embed.json', { texts: TEXTS, cases });
}

async function classification() {
    const cases = [];
    for (const model of ['classify', 'classify-multilabel', 'nli', 'rerank']) {
        const tc = await pipeline('text-classification', model, load);
        cases.push({ model, top_k: null, results: await tc(TEXTS, { top_k: null }) });
        cases.push({ model, top_k: 1, results: await tc(TEXTS) });
    }
    write('classify.json', { texts: TEXTS, cases });
}

async function zeroShot() {
    const zs = await pipeline('zero-shot-classification', 'nli', load);
    const cases = [];
    const labelSets = [['sports', 'politics', 'food'], ['movie', 'weather', 'travel', 'music'], ['science']];
    for (const labels of labelSets) {
        for (const multi_label of [false, true]) {
            for (const hypothesis_template of [undefined, 'This text is about {}.']) {
                const opts = { multi_label };
                if (hypothesis_template) opts.hypothesis_template = hypothesis_template;
                const results = [];
                for (const t of TEXTS) results.push(await zs(t, labels, opts));
                cases.push({ candidate_labels: labels, multi_label, hypothesis_template: hypothesis_template ?? '', results });
            }
        }
    }
    write('zeroshot.json', { texts: TEXTS, cases });
}

async function rerank() {
    const tok = await AutoTokenizer.from_pretrained('rerank');
    const model = await AutoModelForSequenceClassification.from_pretrained('rerank', load);
    const queries = ['what is the capital of france', 'football score', 'hello'];
    const cases = [];
    for (const query of queries) {
        const inputs = tok(new Array(TEXTS.length).fill(query), { text_pair: TEXTS, padding: true, truncation: true });
        const { logits } = await model(inputs);
        const raw = arr(logits);
        const scores = raw.map((x) => 1 / (1 + Math.exp(-x)));
        cases.push({ query, documents: TEXTS, logits: raw, scores });
    }
    write('rerank.json', { cases });
}

// beamSearch: Hugging Face transformers' beam search (BeamSearchScorer) for one text.
async function beamSearch(model, tok, text, kwargs) {
    const config = model._prepare_generation_config(null, kwargs);
    const k = config.num_beams;
    const enc = tok(text, { truncation: true });
    const S = enc.input_ids.dims[1];
    const rep = (t) => new Tensor('int64', new BigInt64Array(k * S).map((_, i) => t.data[i % S]), [k, S]);
    const maxLength = config.max_new_tokens != null ? 1 + config.max_new_tokens : config.max_length;
    const genConfig = { ...config, max_length: maxLength };
    const processors = model._get_logits_processor(genConfig, 1, null);
    const eos = [].concat(config.eos_token_id);
    const lp = config.length_penalty;
    let seqs = Array.from({ length: k }, () => [BigInt(config.decoder_start_token_id)]);
    let beamScores = Array.from({ length: k }, (_, i) => (i === 0 ? 0 : -1e9));
    const hyps = [];
    let worst = 1e9;
    const addHyp = (seq, sum, isEos) => {
        const score = sum / Math.pow(seq.length, lp);
        if (hyps.length < k || score > worst) {
            hyps.push({ score, seq: seq.slice(), eos: isEos });
            if (hyps.length > k) {
                let w = 0;
                hyps.forEach((h, i) => { if (h.score < hyps[w].score) w = i; });
                hyps.splice(w, 1);
                worst = Math.min(...hyps.map((h) => h.score));
            } else {
                worst = Math.min(score, worst);
            }
        }
    };
    const isDone = (best, curLen) => {
        if (hyps.length < k) return false;
        if (config.early_stopping === true) return true;
        if (config.early_stopping === 'never') {
            const len = lp > 0 ? maxLength : curLen;
            return worst >= best / Math.pow(len, lp);
        }
        return worst >= best / Math.pow(curLen, lp);
    };
    for (;;) {
        const curLen = seqs[0].length;
        const decoder_input_ids = new Tensor('int64', BigInt64Array.from(seqs.flat()), [k, curLen]);
        const { logits } = await model({ input_ids: rep(enc.input_ids), attention_mask: rep(enc.attention_mask), decoder_input_ids });
        const V = logits.dims[2];
        const lps = new Float64Array(k * V);
        for (let b = 0; b < k; b++) {
            const off = (b * curLen + curLen - 1) * V;
            let m = -Infinity;
            for (let v = 0; v < V; v++) m = Math.max(m, logits.data[off + v]);
            let sum = 0;
            for (let v = 0; v < V; v++) sum += Math.exp(logits.data[off + v] - m);
            const lse = m + Math.log(sum);
            for (let v = 0; v < V; v++) lps[b * V + v] = logits.data[off + v] - lse;
        }
        const scoresT = new Tensor('float64', lps, [k, V]);
        processors(seqs, scoresT);
        const cands = [];
        for (let b = 0; b < k; b++) for (let v = 0; v < V; v++) cands.push({ s: scoresT.data[b * V + v] + beamScores[b], b, v });
        cands.sort((x, y) => (y.s - x.s) || (x.b - y.b) || (x.v - y.v));
        const top = cands.slice(0, 2 * k);
        const next = [];
        for (let rank = 0; rank < top.length; rank++) {
            const c = top[rank];
            if (eos.includes(c.v)) {
                if (rank < k) addHyp(seqs[c.b], c.s, true);
                continue;
            }
            next.push(c);
            if (next.length === k) break;
        }
        if (isDone(top[0].s, curLen)) break;
        const nextSeqs = next.map((c) => [...seqs[c.b], BigInt(c.v)]);
        if (curLen + 1 >= maxLength) {
            next.forEach((c, i) => addHyp(nextSeqs[i], c.s, false));
            break;
        }
        seqs = nextSeqs;
        beamScores = next.map((c) => c.s);
    }
    let best = hyps[0];
    for (const h of hyps.slice(1)) if (h.score >= best.score) best = h;
    return { ids: best.seq.slice(1).map(Number), eos: best.eos };
}

async function summarization() {
    const tok = await AutoTokenizer.from_pretrained('summarize');
    const model = await AutoModelForSeq2SeqLM.from_pretrained('summarize', load);
    const texts = TEXTS;
    const greedyCases = [
        {}, { max_new_tokens: 5 }, { min_new_tokens: 15 }, { no_repeat_ngram_size: 0 }, { no_repeat_ngram_size: 2 },
        { max_new_tokens: 40, min_new_tokens: 30, no_repeat_ngram_size: 1 },
    ];
    const greedy = [];
    for (const opts of greedyCases) {
        const results = [];
        for (const t of texts) {
            const seq = (await model.generate({ ...tok(t, { truncation: true }), ...opts })).tolist()[0].map(Number);
            results.push(seq);
        }
        greedy.push({ options: opts, sequences: results });
    }
    const summarizer = await pipeline('summarization', 'summarize', load);
    const summaryText = [];
    for (const t of texts) summaryText.push((await summarizer(t))[0].summary_text);

    const beamCases = [
        { num_beams: 2 }, { num_beams: 3 }, { num_beams: 4, length_penalty: 2.0 }, { num_beams: 3, length_penalty: -1.0 },
        { num_beams: 3, early_stopping: false }, { num_beams: 3, early_stopping: 'never' },
        { num_beams: 3, no_repeat_ngram_size: 2, min_new_tokens: 4 }, { num_beams: 5, max_new_tokens: 6 },
    ];
    const beam = [];
    for (const opts of beamCases) {
        const results = [];
        for (const t of texts) results.push(await beamSearch(model, tok, t, opts));
        beam.push({ options: opts, results });
    }
    // What transformers.js's own generate() returns for num_beams > 1 (greedy search).
    const tjsBeam = [];
    for (const t of texts) tjsBeam.push((await model.generate({ ...tok(t, { truncation: true }), num_beams: 3 })).tolist()[0].map(Number));
    write('summarize.json', { texts, greedy, summary_text: summaryText, beam, transformers_js_generate_num_beams_3: tjsBeam });
}

// images: the test images, made from a formula the Go tests repeat (no image
// files are committed): value(x, y, c) for an RGB image of w×h.
export function patternImage(w, h) {
    const data = new Uint8ClampedArray(w * h * 3);
    for (let y = 0; y < h; y++) {
        for (let x = 0; x < w; x++) {
            for (let c = 0; c < 3; c++) data[(y * w + x) * 3 + c] = (x * 29 + y * 53 + c * 97 + ((x * y) % 11) * 7) % 256;
        }
    }
    return new RawImage(data, w, h, 3);
}

const IMAGE_SIZES = [[32, 32], [32, 48], [48, 32], [40, 56], [20, 24], [64, 40], [1, 1], [3, 97]];

async function images() {
    const cases = [];
    for (const model of ['vit-classify', 'vit-embed']) {
        const processor = await AutoProcessor.from_pretrained(model);
        const task = model === 'vit-classify' ? 'image-classification' : 'image-feature-extraction';
        const pipe = await pipeline(task, model, load);
        for (const [w, h] of IMAGE_SIZES) {
            const img = patternImage(w, h);
            const { pixel_values } = await processor(img);
            const c = { model, width: w, height: h, pixel_dims: pixel_values.dims, pixel_values: arr(pixel_values) };
            if (task === 'image-classification') {
                c.results = await pipe(img, { top_k: null });
            } else {
                c.pooler_output = arr(await pipe(img, { pool: true }));
                const hidden = await pipe(img);
                c.cls = Array.from(hidden.data.slice(0, hidden.dims[2]), Number);
            }
            cases.push(c);
        }
    }
    // A CLIP folder: its vision tower (onnx/vision_model.onnx) and image_embeds.
    const processor = await AutoProcessor.from_pretrained('clip-vision');
    const vision = await CLIPVisionModelWithProjection.from_pretrained('clip-vision', load);
    for (const [w, h] of IMAGE_SIZES) {
        const { pixel_values } = await processor(patternImage(w, h));
        const { image_embeds } = await vision({ pixel_values });
        cases.push({ model: 'clip-vision', width: w, height: h, pixel_dims: pixel_values.dims, pixel_values: arr(pixel_values), image_embeds: arr(image_embeds) });
    }
    write('images.json', { cases });
}

const sections = { embeddings, classification, zeroShot, rerank, summarization, images };
const only = process.argv.slice(2);
for (const [name, run] of Object.entries(sections)) {
    if (only.length === 0 || only.includes(name)) await run();
}
