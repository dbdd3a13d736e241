package ggufscan

import (
	"cmp"
	"encoding/binary"
	"math/bits"
	"slices"
	"strings"
)

// The hyperparameter and vocabulary bounds. The metadata parser and the
// placement estimate allocate and loop by the block count (one slice element
// per block: 2^32-1 blocks took the daemon down with "fatal error: out of
// memory", which recover cannot catch), and llama.cpp sizes its buffers by
// all of these. Each bound is far above every real model and at or above
// what llama.cpp itself accepts; a file past one is refused before any other
// parser sees it.
const (
	// DefaultMaxBlockCount is llama.cpp's LLAMA_MAX_LAYERS (it asserts
	// block_count <= 512); the deepest real models have 126 blocks.
	DefaultMaxBlockCount = 512
	// DefaultMaxHeads bounds attention heads and KV heads (scalar or per
	// layer); real models have at most 128.
	DefaultMaxHeads = 4096
	// DefaultMaxHeadDim bounds key and value lengths per head; real models
	// have at most 576 (MLA).
	DefaultMaxHeadDim = 1 << 14
	// DefaultMaxEmbedding bounds embedding lengths; real models have at most
	// 18,432.
	DefaultMaxEmbedding = 1 << 17
	// DefaultMaxFeedForward bounds feed-forward lengths (dense and expert,
	// scalar or per layer); real models have at most 73,728.
	DefaultMaxFeedForward = 1 << 20
	// DefaultMaxContext bounds the trained context length; the longest real
	// one is 10,485,760 (Llama 4 Scout).
	DefaultMaxContext = 1 << 26
	// DefaultMaxExperts is llama.cpp's LLAMA_MAX_EXPERTS; real models have
	// at most 512. The experts used per token must not exceed the experts.
	DefaultMaxExperts = 1024
	// DefaultMaxVocab bounds tokenizer.ggml.tokens and <arch>.vocab_size;
	// real vocabularies have at most 262,144 tokens.
	DefaultMaxVocab = 1 << 21
	// DefaultMaxTokenLen bounds one string of a tokenizer.ggml.* array (a
	// token, a merge); the longest real ones are 1,025 bytes.
	DefaultMaxTokenLen = 64 << 10
	// DefaultMaxMergesPerToken bounds the merges against the tokens; real
	// vocabularies have at most 2 merges per token.
	DefaultMaxMergesPerToken = 8
)

// countRule bounds one integer hyperparameter.
type countRule struct {
	suffix   string
	limit    func(Limits) uint64
	perLayer bool // may be an array with one value per block
}

// countRules are matched on the key's suffix, whatever the architecture
// prefix (llama., qwen2., clip.vision., ...), so that a key is bounded
// wherever it appears. Longer suffixes come first.
var countRules = []countRule{
	{"block_count", func(l Limits) uint64 { return l.MaxBlockCount }, false}, // also decoder_, leading_dense_, posnet.
	{".nextn_predict_layers", func(l Limits) uint64 { return l.MaxBlockCount }, false},
	{".context_length", func(l Limits) uint64 { return l.MaxContext }, false},
	{".embedding_length", func(l Limits) uint64 { return l.MaxEmbedding }, false},
	{".expert_shared_feed_forward_length", func(l Limits) uint64 { return l.MaxFeedForward }, true},
	{".expert_feed_forward_length", func(l Limits) uint64 { return l.MaxFeedForward }, true},
	{".feed_forward_length", func(l Limits) uint64 { return l.MaxFeedForward }, true},
	{".attention.head_count_kv", func(l Limits) uint64 { return l.MaxHeads }, true},
	{".attention.head_count", func(l Limits) uint64 { return l.MaxHeads }, true},
	{".attention.key_length", func(l Limits) uint64 { return l.MaxHeadDim }, false},
	{".attention.value_length", func(l Limits) uint64 { return l.MaxHeadDim }, false},
	{".attention.key_length_mla", func(l Limits) uint64 { return l.MaxHeadDim }, false},
	{".attention.value_length_mla", func(l Limits) uint64 { return l.MaxHeadDim }, false},
	{".attention.key_length_swa", func(l Limits) uint64 { return l.MaxHeadDim }, false},
	{".attention.value_length_swa", func(l Limits) uint64 { return l.MaxHeadDim }, false},
	{".expert_count", func(l Limits) uint64 { return l.MaxExperts }, false},
	{".expert_used_count", func(l Limits) uint64 { return l.MaxExperts }, true},
	{".expert_shared_count", func(l Limits) uint64 { return l.MaxExperts }, false},
	{".vocab_size", func(l Limits) uint64 { return l.MaxVocab }, false},
	// A period, or one bool per block; the parser reads the array in.
	{".attention.sliding_window_pattern", func(l Limits) uint64 { return l.MaxContext }, true},
}

// ruleFor returns the count rule of key, if any. Keys of the general. and
// tokenizer. namespaces carry no hyperparameters.
func ruleFor(key string) (countRule, bool) {
	if strings.HasPrefix(key, "general.") || strings.HasPrefix(key, "tokenizer.") {
		return countRule{}, false
	}
	for _, r := range countRules {
		if strings.HasSuffix(key, r.suffix) {
			return r, true
		}
	}
	return countRule{}, false
}

// Vocabulary keys (llama.cpp's tokenizer.ggml.*).
const (
	keyTokens    = "tokenizer.ggml.tokens"
	keyScores    = "tokenizer.ggml.scores"
	keyTokenType = "tokenizer.ggml.token_type"
	keyMerges    = "tokenizer.ggml.merges"
)

// arrayFact is what the scan recorded of one top-level array.
type arrayFact struct {
	seen bool
	at   int64 // offset of the key's value type
	elem uint32
	n    uint64
}

// facts are the values that are checked against each other once the whole
// metadata has been read. Their size is bounded by the key count, never by a
// value in the file.
type facts struct {
	tokens, scores, types, merges arrayFact
	blocks                        map[string]uint64    // arch prefix -> block_count
	experts                       map[string]uint64    // arch prefix -> expert_count
	expertsUsed                   map[string]countSeen // arch prefix -> largest expert_used_count
	layerArrays                   []layerArray
}

type countSeen struct {
	v  uint64
	at int64
}

type layerArray struct {
	key, prefix string
	n           uint64
	at          int64
}

// integer reads one integer value of type vt (any width, signed or not) and
// returns it; a negative value, a float, a bool or a string is an error.
func (s *scanner) integer(key string, vt uint32, at int64) (uint64, error) {
	n := fixedSize(vt)
	if n == 0 || vt == typeBool || vt == typeFloat32 || vt == typeFloat64 {
		return 0, s.fail(at, "metadata key %q is a %s; it must be an integer", clip(key), typeName(vt))
	}
	vat := s.off
	if err := s.read(s.tmp[:n], "value of "+clip(key)); err != nil {
		return 0, err
	}
	var u uint64
	var neg bool
	switch vt {
	case typeUint8:
		u = uint64(s.tmp[0])
	case typeInt8:
		v := int8(s.tmp[0])
		u, neg = uint64(v), v < 0
	case typeUint16:
		u = uint64(binary.LittleEndian.Uint16(s.tmp[:2]))
	case typeInt16:
		v := int16(binary.LittleEndian.Uint16(s.tmp[:2]))
		u, neg = uint64(v), v < 0
	case typeUint32:
		u = uint64(binary.LittleEndian.Uint32(s.tmp[:4]))
	case typeInt32:
		v := int32(binary.LittleEndian.Uint32(s.tmp[:4]))
		u, neg = uint64(v), v < 0
	case typeUint64:
		u = binary.LittleEndian.Uint64(s.tmp[:8])
	case typeInt64:
		v := int64(binary.LittleEndian.Uint64(s.tmp[:8]))
		u, neg = uint64(v), v < 0
	}
	if neg {
		return 0, s.fail(vat, "metadata key %q is negative (%d)", clip(key), int64(u))
	}
	return u, nil
}

// count reads and bounds the value of a key that has a count rule: an
// integer, or for a per-layer key an array of 1 to MaxBlockCount integers (or
// bools) each within the bound.
func (s *scanner) count(f *facts, key string, vt uint32, at int64, r countRule) error {
	limit := r.limit(s.lim)
	prefix := strings.TrimSuffix(key, r.suffix)
	check := func(v uint64, vat int64) error {
		if v > limit {
			return s.fail(vat, "metadata key %q is %d, more than the limit of %d", clip(key), v, limit)
		}
		return nil
	}
	var largest uint64
	if vt != typeArray {
		vat := s.off
		v, err := s.integer(key, vt, at)
		if err != nil {
			return err
		}
		if err := check(v, vat); err != nil {
			return err
		}
		largest = v
	} else {
		if !r.perLayer {
			return s.fail(at, "metadata key %q is an array; it must be one integer", clip(key))
		}
		aat := s.off
		elem, err := s.u32("array type of " + clip(key))
		if err != nil {
			return err
		}
		n, err := s.u64("array length of " + clip(key))
		if err != nil {
			return err
		}
		if n == 0 || n > s.lim.MaxBlockCount {
			return s.fail(aat, "metadata key %q: per-layer array of %d elements (must be 1 to %d, one per block)", clip(key), n, s.lim.MaxBlockCount)
		}
		if elem == typeArray || elem == typeString || elem == typeFloat32 || elem == typeFloat64 || elem >= typeCount {
			return s.fail(aat, "metadata key %q: per-layer array of %s; its elements must be integers", clip(key), typeName(elem))
		}
		if hi, lo := bits.Mul64(n, fixedSize(elem)); hi != 0 || lo > uint64(max(s.remaining(), 0)) {
			return s.fail(aat, "metadata key %q: array of %d %s elements cannot fit in the %d bytes left (truncated or corrupt)", clip(key), n, typeName(elem), s.remaining())
		}
		for range n {
			eat := s.off
			var v uint64
			if elem == typeBool {
				if err := s.read(s.tmp[:1], "value of "+clip(key)); err != nil {
					return err
				}
				v = uint64(s.tmp[0] & 1)
			} else if v, err = s.integer(key, elem, aat); err != nil {
				return err
			}
			if err := check(v, eat); err != nil {
				return err
			}
			largest = max(largest, v)
		}
		f.layerArrays = append(f.layerArrays, layerArray{key: key, prefix: prefix, n: n, at: aat})
	}
	switch r.suffix {
	case "block_count":
		if arch, ok := strings.CutSuffix(key, ".block_count"); ok {
			f.blocks[arch] = largest
		}
	case ".expert_count":
		f.experts[prefix] = largest
	case ".expert_used_count":
		f.expertsUsed[prefix] = countSeen{v: largest, at: at}
	}
	return nil
}

// vocabArray checks the declared type and length of a vocabulary array
// before its elements are walked, and records it.
func (s *scanner) vocabArray(f *facts, key string, at int64, elem uint32, n uint64) error {
	var fact *arrayFact
	switch key {
	case keyTokens:
		fact = &f.tokens
		if elem != typeString {
			return s.fail(at, "%s is an array of %s; it must hold strings", key, typeName(elem))
		}
		if n > s.lim.MaxVocab {
			return s.fail(at, "%s holds %d tokens, more than the limit of %d", key, n, s.lim.MaxVocab)
		}
	case keyMerges:
		fact = &f.merges
		if elem != typeString {
			return s.fail(at, "%s is an array of %s; it must hold strings", key, typeName(elem))
		}
		if n > s.lim.MaxVocab*s.lim.MaxMergesPerToken {
			return s.fail(at, "%s holds %d merges, more than the limit of %d", key, n, s.lim.MaxVocab*s.lim.MaxMergesPerToken)
		}
	case keyScores:
		fact = &f.scores
		if elem != typeFloat32 && elem != typeInt32 {
			return s.fail(at, "%s is an array of %s; it must hold float32 (or int32) scores", key, typeName(elem))
		}
	case keyTokenType:
		fact = &f.types
		if elem != typeInt32 {
			return s.fail(at, "%s is an array of %s; it must hold int32 token types", key, typeName(elem))
		}
	default:
		return nil
	}
	*fact = arrayFact{seen: true, at: at, elem: elem, n: n}
	return nil
}

// vocabScalar refuses a vocabulary key that is not an array at all.
func (s *scanner) vocabScalar(key string, vt uint32, at int64) error {
	switch key {
	case keyTokens, keyMerges, keyScores, keyTokenType:
		return s.fail(at, "%s is a %s; it must be an array", key, typeName(vt))
	}
	return nil
}

// crossCheck compares what the whole metadata declared.
func (s *scanner) crossCheck(f *facts) error {
	tok := f.tokens
	for _, a := range []struct {
		key  string
		fact arrayFact
	}{{keyScores, f.scores}, {keyTokenType, f.types}, {keyMerges, f.merges}} {
		if !a.fact.seen {
			continue
		}
		if !tok.seen {
			return s.fail(a.fact.at, "%s is present but %s is not", a.key, keyTokens)
		}
		if a.key == keyMerges {
			if limit := max(tok.n, 1) * s.lim.MaxMergesPerToken; a.fact.n > limit {
				return s.fail(a.fact.at, "%s holds %d merges for %d tokens (at most %d per token)", keyMerges, a.fact.n, tok.n, s.lim.MaxMergesPerToken)
			}
			continue
		}
		if a.fact.n != tok.n {
			return s.fail(a.fact.at, "%s holds %d entries but %s holds %d: the vocabulary arrays disagree", a.key, a.fact.n, keyTokens, tok.n)
		}
	}
	// In file order, so that the same file always names the same fault.
	prefixes := make([]string, 0, len(f.expertsUsed))
	for prefix := range f.expertsUsed {
		prefixes = append(prefixes, prefix)
	}
	slices.SortFunc(prefixes, func(a, b string) int { return cmp.Compare(f.expertsUsed[a].at, f.expertsUsed[b].at) })
	for _, prefix := range prefixes {
		used := f.expertsUsed[prefix]
		if n := f.experts[prefix]; used.v > n {
			return s.fail(used.at, "%s.expert_used_count is %d, more than %s.expert_count (%d)", clip(prefix), used.v, clip(prefix), n)
		}
	}
	for _, la := range f.layerArrays {
		if b, ok := f.blocks[la.prefix]; ok && la.n != b {
			return s.fail(la.at, "metadata key %q has %d per-layer values but %s.block_count is %d", clip(la.key), la.n, clip(la.prefix), b)
		}
	}
	return nil
}
