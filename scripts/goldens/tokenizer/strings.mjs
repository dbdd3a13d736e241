// Test strings shared by every tokenizer golden. Characters are kept to
// Unicode 15.0 so that the Go side (whose tables are Unicode 15.0) classifies
// them the same way as the JavaScript engine.

const rep = (s, n) => s.repeat(n);

export const handwritten = [
  // empty and tiny
  "",
  " ",
  "  ",
  "\t",
  "\n",
  "a",
  "A",
  "?",
  // plain English
  "Hello, world!",
  "The quick brown fox jumps over the lazy dog.",
  "ThE QuIcK BrOwN FoX",
  "ALL CAPS SENTENCE WITH NUMBERS 123.",
  "I'm sure you're right, but they'll say we've done what I'd do; it's fine.",
  "can't won't shouldn't y'all o'clock",
  "HE'S THEY'RE WE'VE I'LL IT'D I'M DON'T",
  "'s 't 're 've 'm 'll 'd",
  "it'S don'T We'Ve",
  "Mr. Smith went to Washington D.C. on Jan. 5th, 2021.",
  "unaffable unbelievable uncharacteristically",
  "tokenization tokenizer tokenize tokens",
  // accents and case
  "café naïve résumé façade",
  "Ångström Øresund Ærø",
  "ÉCOLE ÉLÉMENTAIRE",
  "São Paulo, Brasília",
  "Crème brûlée à la carte",
  "Ελληνικά γλώσσα",
  "ΟΔΥΣΣΕΥΣ ΚΑΙ ΣΟΦΟΣ",
  "İstanbul ıi İI",
  "straße STRASSE Straße",
  "ﬁne ﬂow ﬀ",
  "Ǆ ǅ ǆ ǈ",
  "e\u0301 a\u0308\u0304 n\u0303",
  "Z\u0351\u0352a\u0353l\u0354g\u0355o",
  "Ｈｅｌｌｏ ＡＢＣ１２３",
  "ｶﾀｶﾅ ﾊﾝｶｸ",
  "Åå Ćć Đđ Łł Ńń Őő Şş Ťť Űű Żż",
  "Ḁḁ Ẁẁ Ỳỳ",
  // CJK
  "你好世界",
  "我爱北京天安门。",
  "日本語のテキストです。",
  "カタカナとひらがな",
  "한국어 텍스트입니다",
  "中文English混合text",
  "𠀀𠀁𠀂 ext-B",
  "㐀㐁 ext-A",
  "豈更車 compatibility",
  "漢字かな交じり文",
  "〜～！？",
  // emoji
  "😀",
  "I love 🍕 and 🍣!",
  "👍🏽👍🏿",
  "👨‍👩‍👧‍👦 family",
  "🏳️‍🌈 flag",
  "❤️ heart",
  "🇺🇸🇯🇵🇩🇪",
  "1️⃣ 2️⃣",
  "🧑🏿‍💻 coder",
  "😀😃😄😁😆😅😂🤣",
  "emoji🙂inside",
  // control and odd whitespace
  "a\u0000b",
  "\u0001\u0002\u0003x",
  "tab\there",
  "line\nbreak",
  "cr\r\nlf",
  "\u000b\u000cvt ff",
  "next\u0085line",
  "zero\u200bwidth",
  "join\u200dhere",
  "\ufeffBOM start",
  "soft\u00adhyphen",
  "sep\u2028line\u2029para",
  "no\u00a0break",
  "ideo\u3000space",
  "em\u2003space",
  "del\u007fchar",
  "replace\ufffdchar",
  "private\ue000use",
  "bidi\u202eoverride\u202c",
  "\u0007bell\u001bescape",
  // long words
  "supercalifragilisticexpialidocious",
  "pneumonoultramicroscopicsilicovolcanoconiosis",
  "Donaudampfschifffahrtsgesellschaftskapitän",
  rep("a", 99),
  rep("a", 100),
  rep("a", 101),
  rep("ab", 60),
  rep("xyz", 40) + " end",
  "https://example.com/path/to/resource?query=1&other=two#fragment",
  "0x1f2e3d4c5b6a79880123456789abcdef",
  "deadbeefcafebabe0123456789",
  // numbers
  "0",
  "123",
  "1234",
  "12345678901234567890",
  "3.14159265358979",
  "-42 +17",
  "1,000,000.50",
  "1e10 2E-5",
  "٣٤٥ Arabic-Indic",
  "१२३ Devanagari",
  "½ ¾ ² ³ ¹",
  "①②③ ⑩",
  "Ⅻ Ⅳ roman",
  "Call 555-0199 or +1 (800) 555-0100",
  "Version 2.0.1-beta+exp.sha.5114f85",
  "2024-01-15T10:30:00Z",
  // whitespace runs
  "a  b",
  "a   b",
  "a    b     c",
  "   leading spaces",
  "trailing spaces   ",
  "a\n\n\nb",
  "a \n b",
  " \t \n ",
  "word\t\tword",
  "\n\n",
  "x \n\n y",
  "  \n  indented\n    more",
  // mixed scripts
  "Hello мир 世界 مرحبا שלום",
  "Привет, как дела?",
  "مرحبا بالعالم",
  "עברית עם ניקוד: שָׁלוֹם",
  "हिन्दी भाषा",
  "ภาษาไทย",
  "Tiếng Việt có dấu",
  "ქართული ენა",
  "Հայերեն",
  "አማርኛ",
  "Ελληνικά and English and Русский",
  "ㄅㄆㄇ bopomofo",
  "ᚠᚢᚦ runes",
  // code
  "func main() { fmt.Println(\"hi\") }",
  "<html><body class=\"x\">text</body></html>",
  "x += y**2 // comment",
  "def f(x):\n    return x * 2\n",
  "SELECT * FROM t WHERE a='b';",
  "{\"key\": [1, 2, 3], \"nested\": {\"a\": null}}",
  "/usr/local/bin/modeld --flag=value",
  "first.last+tag@example.org",
  "C:\\Windows\\System32",
  "if (a && b || !c) { return; }",
  "snake_case camelCase PascalCase kebab-case",
  "#!/bin/bash\necho $HOME",
  // punctuation
  "...",
  "!!!???",
  "— – -",
  "«quotes» „German“",
  "“smart” ‘quotes’",
  "¿Qué? ¡Hola!",
  "$100 €50 £20 ¥1000 ₹5",
  "@#%^&*",
  "a/b\\c|d",
  "~`",
  "(parens) [brackets] {braces} <angles>",
  "end.",
  "Wait... what?!",
  "\"double\" 'single'",
  "a-b_c.d,e;f:g",
  "™ © ® ° ± × ÷",
  "→ ← ↑ ↓ ⇒",
  "∑ ∫ √ ∞ ≠ ≤",
  "♠ ♣ ♥ ♦",
  "§1 ¶2 †3 ‡4",
];

// mulberry32: a small seeded generator so the strings are the same every run.
function prng(seed) {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

const fragments = [
  "the", "of", "and", "model", "token", "embedding", "Hello", "WORLD", "über",
  "naïve", "東京", "北京", "ソウル", "서울", "😀", "👍🏽", "👨‍👩‍👧", "🇫🇷",
  "123", "4567", "3.5", "-", ",", ".", "!", "?", "'s", "'LL", " ", "  ",
  "\n", "\t", "\r\n", "é", "ß", "Σ", "ς", "ı", "İ", "ǅ", "ﬁ", "Ⅻ", "½",
  "(", ")", "[", "]", "{", "}", "\"", "'", "/", "\\", "@", "#", "$", "%",
  "мир", "كتاب", "שלום", "हिन्दी", "ไทย", "\u200d", "\u00a0", "\u3000",
  "\u0301", "antidisestablishmentarianism", "x", "Z", "_", "__init__",
];

export function generated(count, seed) {
  const rnd = prng(seed);
  const out = [];
  for (let i = 0; i < count; i++) {
    const n = 1 + Math.floor(rnd() * 12);
    let s = "";
    for (let j = 0; j < n; j++) {
      s += fragments[Math.floor(rnd() * fragments.length)];
      if (rnd() < 0.4) s += " ";
    }
    out.push(s);
  }
  return out;
}

// Code point ranges assigned long before Unicode 15.0, so that character
// properties agree between JavaScript engines and Go.
const blocks = [
  [0x20, 0x7e], [0x20, 0x7e], [0x00, 0x1f], [0x7f, 0xa0], [0xa1, 0x17f], [0x180, 0x24f],
  [0x250, 0x2af], [0x300, 0x36f], [0x370, 0x3ff], [0x400, 0x4ff], [0x531, 0x556],
  [0x5d0, 0x5ea], [0x620, 0x64a], [0x660, 0x669], [0x905, 0x939], [0x966, 0x96f],
  [0xe01, 0xe3a], [0x1e00, 0x1eff], [0x2000, 0x206f], [0x20a0, 0x20b8], [0x2100, 0x214f],
  [0x2190, 0x21ff], [0x2200, 0x22ff], [0x2460, 0x24ff], [0x3000, 0x303f], [0x3041, 0x3096],
  [0x30a1, 0x30fa], [0x3400, 0x4db5], [0x4e00, 0x9fa5], [0xac00, 0xd7a3], [0xf900, 0xfa2d],
  [0xfb00, 0xfb06], [0xff01, 0xff5e], [0xff61, 0xff9f], [0xfffd, 0xfffd], [0x1f300, 0x1f5ff],
  [0x1f600, 0x1f64f], [0x1f3fb, 0x1f3ff], [0x20000, 0x2a6d6], [0x1d400, 0x1d4ff],
];

export function randomUnicode(count, seed) {
  const rnd = prng(seed);
  const out = [];
  for (let i = 0; i < count; i++) {
    const n = 1 + Math.floor(rnd() * 24);
    let s = "";
    for (let j = 0; j < n; j++) {
      if (rnd() < 0.15) {
        s += " ";
        continue;
      }
      const [lo, hi] = blocks[Math.floor(rnd() * blocks.length)];
      s += String.fromCodePoint(lo + Math.floor(rnd() * (hi - lo + 1)));
    }
    out.push(s);
  }
  return out;
}

// A longer paragraph, repeated into a few sizes.
const paragraph =
  "Local models answer without a network. The daemon loads a model once, " +
  "keeps it warm, and tokenizes every request the same way as the reference " +
  "implementation: accents (café, naïve), CJK (東京, 서울), emoji (👍🏽), and " +
  "numbers like 3.14159 or 1,000,000 all survive the round trip.\n\n";

export const long = [paragraph, rep(paragraph, 4), rep(paragraph, 12)];

export const pairs = [
  ["How old are you?", "I am 6 years old."],
  ["A man is playing a guitar.", "This example is about music."],
  ["A man is playing a guitar.", "This example is about sports."],
  ["What is the capital of France?", "Paris is the capital and most populous city of France."],
  ["query: café", "passage: The café serves crème brûlée."],
  ["東京はどこ?", "東京は日本の首都です。"],
  ["", "second only"],
  ["first only", ""],
  ["Emoji 👨‍👩‍👧‍👦", "🏳️‍🌈 and 🇺🇸"],
  ["Numbers 12345", "and 3.14159"],
  ["  spaced  out  ", "\ttabs\tand\nnewlines"],
  ["UPPER lower", "MiXeD CaSe"],
  ["Who wrote Hamlet?", "Hamlet is a tragedy written by William Shakespeare."],
  ["Is it raining?", "The weather today is sunny with no clouds."],
  ["rerank me", rep("long document text ", 30)],
  ["Привет", "мир"],
];

export const truncation = [
  { text: "The quick brown fox jumps over the lazy dog.", max_length: 8 },
  { text: "The quick brown fox jumps over the lazy dog.", max_length: 5 },
  { text: paragraph, max_length: 16 },
  { text: rep(paragraph, 12), max_length: 64 },
  { text: "short", max_length: 32 },
  { text: "How old are you?", text_pair: "I am 6 years old and I like trains.", max_length: 12 },
  { text: "premise text that is long enough", text_pair: "hypothesis", max_length: 10 },
];

export const padding = [
  ["short", "a somewhat longer sentence here", "mid length text"],
  ["東京", "Hello world, this is the longest of the three texts.", ""],
];
