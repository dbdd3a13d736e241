package wire

import (
	"errors"
	"time"

	"github.com/modeld/modeld/backends"
)

// Defaults of Options.
const (
	DefaultSlots      = 4
	DefaultContextCap = backends.DefaultContextCap
	DefaultBatchSize  = 512
	// DefaultLookup is the most tokens one decode step drafts by prompt
	// lookup for a request that asks for it on a model whose
	// Options.Lookup is 0.
	DefaultLookup = 8
)

// PromptCacheStopGrace is how long the daemon lets a runner whose model
// has a prompt cache (Options.PromptCacheDir) stop before it kills it: the
// runner saves its slots' prompts on the way out.
const PromptCacheStopGrace = 10 * time.Second

// Options are the engine's settings of one model (engine.Open), which the
// daemon passes to a runner by flags. Zero fields take the defaults.
type Options struct {
	// ContextSize is the context of one sequence (one request), in tokens.
	// 0 means min(the model's trained context, ContextCap). Each slot gets
	// its own ContextSize, so the KV cache holds Slots*ContextSize tokens.
	ContextSize int
	// ContextCap bounds the default context size (default DefaultContextCap).
	ContextCap int
	// Slots is the number of sequences decoded together (default 4).
	Slots int
	// Threads used by decode steps of one token (default engine.DefaultThreads()).
	Threads int
	// BatchThreads used by steps of several tokens: prompt chunks, several
	// streams at once (default engine.DefaultBatchThreads()).
	BatchThreads int
	// BatchSize is the most tokens one decode step carries (default 512).
	BatchSize int
	// GPULayers is the number of layers to offload: -1 all, 0 none (CPU).
	// When loading with layers on a GPU fails, the engine falls back to the CPU
	// and says why in Info.GPUFallback.
	GPULayers int
	// MaxWaiting bounds the requests waiting for a free slot; Generate
	// returns ErrBusy beyond it. 0 means no bound.
	MaxWaiting int
	// PromptCacheDir, when set, keeps the KV of long prompt prefixes on
	// disk there when a slot drops them (eviction, unload, shutdown) and
	// restores them for a later prompt that shares them (package
	// promptcache). "" keeps nothing on disk.
	PromptCacheDir string
	// PromptCacheMax bounds the bytes in PromptCacheDir (0: the package's
	// default), lowered to what the free disk allows.
	PromptCacheMax int64
	// ModelSHA256 is the model file's sha256 in hex, which keys the prompt
	// cache; the cache is off without it.
	ModelSHA256 string
	// Lookup is the most tokens a decode step drafts for a sequence by
	// prompt lookup (engine/lookup.go): continuations of the latest earlier
	// occurrence of the sequence's last few tokens in its prompt and output,
	// verified in the same step. 0 is off, except for the requests that
	// ask for it (backends.Request.Speculative), which draft DefaultLookup.
	Lookup int
	// ReuseAnswers evaluates each idle slot's last answer again, in steps
	// of two or more tokens, so that the next turn of the conversation,
	// whose prompt repeats it, reuses its KV instead of evaluating it on
	// the turn's critical path (engine/answers.go). Off, a slot reuses
	// only its last prompt.
	ReuseAnswers bool
	// Projector is the model's multimodal projector (an mmproj GGUF), read
	// by llama.cpp's multimodal library (libmtmd.so in the library dir) so
	// that chat messages may carry images. "" loads the model text-only.
	Projector string
}

// Info describes a loaded model.
type Info struct {
	Path           string
	Arch           string // general.architecture
	Name           string // general.name
	Description    string // llama.cpp's one-line description
	FileType       string // e.g. "F16", "Q4_K - Medium"
	Params         uint64
	SizeBytes      uint64
	TrainedContext int
	ContextSize    int // per sequence
	Slots          int
	BatchSize      int
	Threads        int
	BatchThreads   int
	VocabSize      int
	VocabType      string // "spm", "bpe", "wpm", "ugm", "rwkv", "plamo2"
	AddBOS         bool
	BOS, EOS       int32
	// FIM is the vocabulary's fill-in-the-middle tokens (prefix, suffix,
	// middle); nil when it lacks any of them.
	FIM          []int32 `json:",omitempty"`
	ChatTemplate string  // "" when the model has none
	GPULayers    int     // layers requested on a GPU (0 on the CPU)
	GPUFallback  string  // why the GPU load failed and the CPU was used
	// Vision says that the model reads images (its projector is loaded);
	// VisionOff says why a model given a projector reads none (the
	// multimodal library is not installed).
	Vision    bool   `json:",omitempty"`
	VisionOff string `json:",omitempty"`
}

// HasChatTemplate reports whether the model carries tokenizer.chat_template.
func (i Info) HasChatTemplate() bool { return i.ChatTemplate != "" }

// Stats is a snapshot of a model's scheduler.
type Stats struct {
	Slots         int
	Active        int    // slots running a request
	Waiting       int    // requests waiting for a slot
	DecodeCalls   uint64 // llama_decode calls
	DecodedTokens uint64 // tokens evaluated (prompt and generated)
	// KVTokens is the tokens whose KV the running requests' sequences
	// hold; KVCapacity is what the context holds in all (Slots sequences
	// of the context size). An idle slot's KV, kept for prefix reuse, is
	// free: the next request may overwrite it.
	KVTokens   int
	KVCapacity int
	// Counters since the model loaded, over ended generations: their
	// prompt and completion tokens (as their usage), how many ended, and
	// how many of those were cancelled.
	PromptTokens     uint64
	CompletionTokens uint64
	Generations      uint64
	Cancelled        uint64
	// The prefix cache, as vLLM counts it: the prompt tokens of the
	// requests given a slot (looked up in the KV its slots keep), and how
	// many of those were read from it instead of evaluated.
	PrefixQueryTokens uint64
	PrefixHitTokens   uint64
	// Prompt lookup (speculative decoding): the steps that carried a
	// draft, the tokens drafted, and those of them the model's own
	// choice confirmed (each one a token that cost no step of its own).
	Drafts         uint64
	DraftTokens    uint64
	AcceptedTokens uint64
	// ReevaluatedTokens are answer tokens evaluated again while the model
	// was idle, so that the next turn reuses them (Options.ReuseAnswers).
	ReevaluatedTokens uint64
}

// Errors of the engine that are not the backends contract's: they are
// defined here so that errors.Is finds them on both ends of the socket.
var (
	// ErrDecode: llama_decode failed.
	ErrDecode = errors.New("llama: decode failed")
	// ErrNotInitialized: the runtime library was not loaded (engine.Init).
	ErrNotInitialized = errors.New("llama: runtime library not initialised (call Init)")
)
