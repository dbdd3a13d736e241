// Package tokenizer encodes text into model input ids from a Hugging Face
// tokenizer.json (plus tokenizer_config.json), producing the same ids as
// transformers.js for the same files. It owns text-to-ids and ids-to-text
// only: it builds no tensors and runs no model.
//
// Supported components (any other type is an error at load):
//
//   - normalizers: BertNormalizer, NFC, NFD, NFKC, NFKD, Lowercase,
//     StripAccents, Replace, Prepend, Strip, Precompiled, Sequence;
//   - pre-tokenizers: BertPreTokenizer, ByteLevel, Metaspace, Whitespace,
//     WhitespaceSplit, Split (Oniguruma regexes with lookaround, run by
//     regexp2), Digits, Punctuation, Replace, Sequence;
//   - models: WordPiece, BPE (byte fallback, ignore_merges, priority-queue
//     merging), Unigram (Viterbi);
//   - post-processors: TemplateProcessing, BertProcessing,
//     RobertaProcessing, ByteLevel, Sequence;
//   - decoders: WordPiece, ByteLevel, Metaspace, BPEDecoder, ByteFallback,
//     Fuse, Strip, Replace, Sequence;
//   - added tokens (special tokens typed in the text are matched as one
//     token, before normalization unless the token is "normalized"),
//     truncation, padding, single texts and text pairs.
//
// Usage:
//
//	tok, err := tokenizer.Load(modelDir)
//	enc, err := tok.EncodeContext(ctx, text, tokenizer.WithTruncation(0)) // model_max_length
//	pair, err := tok.EncodePairContext(ctx, query, doc, tokenizer.WithTruncation(512))
//	batch, err := tok.EncodeBatchContext(ctx, texts, tokenizer.WithTruncation(0), tokenizer.WithPadding(tokenizer.PadLongest))
//	text := tok.Decode(enc.IDs, true)
//
// # Hostile files
//
// A model's tokenizer files are untrusted input. Load refuses files over
// MaxTokenizerBytes (also after gunzipping) and MaxConfigBytes, vocabularies,
// merges and added tokens over MaxVocab, MaxMerges and MaxAddedTokens,
// patterns longer than MaxPatternRunes or nested deeper than MaxPatternDepth.
// Every compiled pattern has a MatchTimeout: a catastrophically backtracking
// one ends the encode call with a *RegexTimeoutError (the model's fault, an
// HTTP 500) instead of holding a core for ever. The Encode*Context calls stop
// with the context's error when it ends, checked between texts, pieces and
// regex matches; Encode, EncodePair, EncodeBatch and EncodePairBatch are for
// trusted tokenizers and panic on such an error.
//
// # Matching transformers.js
//
// The goal is identical ids, so modeld follows transformers.js (4.3.1, the
// version the goldens in testdata come from) where it differs from the Rust
// tokenizers library:
//
//   - Truncation happens after special tokens are added: a truncated BERT
//     input keeps [CLS] but loses its final [SEP].
//   - BertNormalizer's CJK padding walks UTF-16 code units, so ideographs
//     outside the BMP (CJK Extension B and later) are not split apart.
//   - Metaspace does not split on the replacement character; a Split with
//     behavior MergedWithPrevious, MergedWithNext or Contiguous isolates the
//     matches like Isolated; Punctuation groups runs of punctuation.
//   - A Split with a String pattern and "invert": false keeps the delimiter
//     even with behavior Removed (transformers.js captures it).
//   - Precompiled does not read the charsmap: it strips control characters,
//     maps odd spaces to " " and applies NFKC, like transformers.js.
//   - StripAccents removes marks without decomposing first; BertNormalizer
//     decomposes (NFD) before removing.
//   - Regexes: \s is Unicode White_Space, (?i:...) folds ASCII only, atomic
//     groups and possessive quantifiers behave as plain greedy ones.
//   - Token strings are mapped to ids with added tokens first, then the
//     vocabulary, then the unknown token (Unigram unknown pieces are fused).
//   - Padding uses pad_token, else eos_token; the side is padding_side,
//     else left for LlamaTokenizer and right otherwise.
//   - Decode applies clean_up_tokenization_spaces (default true) and, for
//     ByteLevel, maps characters outside the byte alphabet to byte 0.
//
// Where transformers.js loses data modeld does not follow it: a bare
// ByteLevel post-processor drops the second text of a pair there; here the
// two token lists are concatenated. Token type ids are all zeros when the
// post-processor assigns none (transformers.js returns none).
//
// Character classes come from Go's Unicode tables (Unicode 15.0); text with
// characters assigned after 15.0 may classify differently from a newer
// JavaScript engine.
//
// Offsets are not computed.
package tokenizer
