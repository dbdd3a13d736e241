package ggufscan

// Limits bound what a file may declare. DefaultLimits gives the values modeld
// uses; each is far above what real models need and far below what would
// exhaust memory or time.
type Limits struct {
	// MaxKV bounds the metadata key-value count.
	MaxKV uint64
	// MaxTensors bounds the tensor count.
	MaxTensors uint64
	// MaxDepth bounds array nesting: 1 allows arrays of scalars and strings,
	// 2 arrays of such arrays, and so on.
	MaxDepth int
	// MaxArrayLen bounds the elements of one array.
	MaxArrayLen uint64
	// MaxBlockCount bounds every block count (<arch>.block_count and the
	// like) and the per-layer arrays (one value per block: keys ending in
	// .feed_forward_length, .attention.head_count, .attention.head_count_kv,
	// .expert_used_count, .attention.sliding_window_pattern), which the
	// metadata parser reads into memory.
	MaxBlockCount uint64
	// MaxHeads bounds attention heads and KV heads.
	MaxHeads uint64
	// MaxHeadDim bounds the key and value lengths of one head.
	MaxHeadDim uint64
	// MaxEmbedding bounds embedding lengths.
	MaxEmbedding uint64
	// MaxFeedForward bounds feed-forward lengths, dense and expert.
	MaxFeedForward uint64
	// MaxContext bounds the trained context length.
	MaxContext uint64
	// MaxExperts bounds the expert counts.
	MaxExperts uint64
	// MaxVocab bounds the tokens of tokenizer.ggml.tokens and vocab_size.
	MaxVocab uint64
	// MaxTokenLen bounds one string inside a tokenizer.ggml.* array.
	MaxTokenLen uint64
	// MaxMergesPerToken bounds tokenizer.ggml.merges against the tokens.
	MaxMergesPerToken uint64
	// MaxKeyLen bounds a metadata key, in bytes.
	MaxKeyLen uint64
	// MaxStringLen bounds one string value (also inside arrays), in bytes.
	MaxStringLen uint64
	// MaxTensorNameLen bounds a tensor name, in bytes.
	MaxTensorNameLen uint64
	// MaxMetadataBytes bounds the whole key-value section, in bytes.
	MaxMetadataBytes int64
}

// Bounds modeld applies (see DefaultLimits for the reasons).
const (
	DefaultMaxKV            = 1 << 16
	DefaultMaxTensors       = 1 << 16
	DefaultMaxDepth         = 1
	DefaultMaxArrayLen      = 1 << 24
	DefaultMaxKeyLen        = 1<<16 - 1
	DefaultMaxStringLen     = 64 << 20
	DefaultMaxTensorNameLen = 63
	DefaultMaxMetadataBytes = 256 << 20
	// MaxDims is GGML_MAX_DIMS: a tensor has 1 to 4 dimensions.
	MaxDims = 4
)

// DefaultLimits returns the bounds modeld applies to every GGUF it reads:
//
//   - 65536 metadata keys (real models carry 20 to 100);
//   - 65,536 tensors (the largest models have a few thousand; 512 blocks of
//     128 tensors each would fit);
//   - arrays not nested (depth 1): llama.cpp's loader refuses arrays of
//     arrays, so a deeper file could never run;
//   - 16,777,216 elements per array (vocabularies have up to ~260k tokens
//     and ~515k merges), and one per block for per-layer arrays;
//   - the hyperparameter and vocabulary bounds of hparams.go (block count
//     512, as llama.cpp; heads, head size, embedding, feed-forward, context,
//     experts, vocabulary, token length, merges per token);
//   - keys of at most 65535 bytes (the GGUF specification's limit), strings
//     of at most 64 MiB (chat templates are up to ~100 KB; a whole embedded
//     tokenizer.json is tens of MB), tensor names of at most 63 bytes
//     (llama.cpp refuses names of GGML_MAX_NAME = 64 bytes or more);
//   - 256 MiB of metadata in all (the largest vocabularies need tens of MB).
func DefaultLimits() Limits {
	return Limits{
		MaxKV:             DefaultMaxKV,
		MaxTensors:        DefaultMaxTensors,
		MaxDepth:          DefaultMaxDepth,
		MaxArrayLen:       DefaultMaxArrayLen,
		MaxBlockCount:     DefaultMaxBlockCount,
		MaxHeads:          DefaultMaxHeads,
		MaxHeadDim:        DefaultMaxHeadDim,
		MaxEmbedding:      DefaultMaxEmbedding,
		MaxFeedForward:    DefaultMaxFeedForward,
		MaxContext:        DefaultMaxContext,
		MaxExperts:        DefaultMaxExperts,
		MaxVocab:          DefaultMaxVocab,
		MaxTokenLen:       DefaultMaxTokenLen,
		MaxMergesPerToken: DefaultMaxMergesPerToken,
		MaxKeyLen:         DefaultMaxKeyLen,
		MaxStringLen:      DefaultMaxStringLen,
		MaxTensorNameLen:  DefaultMaxTensorNameLen,
		MaxMetadataBytes:  DefaultMaxMetadataBytes,
	}
}
