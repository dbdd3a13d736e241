package backends

import (
	"context"
	"fmt"
	"strconv"
	"unicode/utf8"
)

// The task capabilities: what a model does besides generating. Each is a
// small interface found by type assertion on a loaded Model (Unwrap first
// when a cache instance holds it); the option and result types are the
// backend-neutral ones every dialect translates to. backends/onnx's task
// pipelines (package pipelines) implement them today.

// Task names, as the model store, the configuration and Info.Task spell
// them.
const (
	TaskChat      = "chat"               // text generation (GGUF)
	TaskEmbed     = "embed"              // feature extraction
	TaskClassify  = "classify"           // text classification
	TaskZeroShot  = "zero-shot-classify" // an NLI classifier used for labels chosen per request
	TaskRerank    = "rerank"             // a cross-encoder scoring (query, document) pairs
	TaskSummarize = "summarize"          // an encoder-decoder generating a summary
)

// Bounds of one task call, checked before any text is tokenized: a call over
// one fails with ErrInvalidRequest. They keep a small request from asking for
// an unbounded amount of memory (texts × labels pairs, texts × beams decoder
// rows). The API refuses the same requests earlier, naming the field.
const (
	// MaxEmbedInputs bounds the texts of one Embed call (OpenAI's limit per
	// embeddings request).
	MaxEmbedInputs = 2048
	// MaxClassifyInputs bounds the texts of one Classify call.
	MaxClassifyInputs = 2048
	// MaxCandidateLabels bounds the labels of one zero-shot call, and
	// MaxZeroShotPairs its texts × labels (each pair is one sequence through
	// the model).
	MaxCandidateLabels = 1024
	MaxZeroShotPairs   = 4096
	// MaxRerankDocuments bounds the documents of one Rerank call.
	MaxRerankDocuments = 1024
	// MaxSummarizeInputs bounds the texts of one Summarize call.
	MaxSummarizeInputs = 64
	// MaxNumBeams bounds num_beams; a model's generation settings asking for
	// more are held to it.
	MaxNumBeams = 16
	// MaxNewTokens bounds max_new_tokens and min_new_tokens (the decoder's
	// position table usually bounds the length far below it).
	MaxNewTokens = 16384
)

// Embedder turns texts into vectors.
type Embedder interface {
	Embed(ctx context.Context, texts []string, opts EmbedOptions) (EmbedResult, error)
	// Dimensions is the vectors' length (0 when the model does not say).
	Dimensions() int
}

// Classifier scores texts against the model's own labels.
type Classifier interface {
	Classify(ctx context.Context, texts []string, opts ClassifyOptions) (ClassifyResult, error)
}

// ZeroShotClassifier scores texts against labels chosen per request.
type ZeroShotClassifier interface {
	ClassifyZeroShot(ctx context.Context, texts, candidateLabels []string, opts ZeroShotOptions) (ZeroShotResult, error)
}

// Reranker scores documents for their relevance to a query.
type Reranker interface {
	Rerank(ctx context.Context, query string, documents []string, opts RerankOptions) (RerankResult, error)
}

// Summarizer generates a summary of each text.
type Summarizer interface {
	Summarize(ctx context.Context, texts []string, opts SummarizeOptions) (SummarizeResult, error)
}

// Pooling turns token vectors into one vector per text.
type Pooling string

// Poolings. The default for a model that names none is PoolingMean.
const (
	PoolingMean      Pooling = "mean"       // attention-masked mean of the token vectors
	PoolingCLS       Pooling = "cls"        // the first token's vector
	PoolingLastToken Pooling = "last_token" // the last non-padding token's vector
)

// ParsePooling accepts mean, cls (or first_token) and last_token (or eos),
// the names transformers.js uses; "" means the model's default.
func ParsePooling(s string) (Pooling, error) {
	switch s {
	case "":
		return "", nil
	case "mean":
		return PoolingMean, nil
	case "cls", "first_token":
		return PoolingCLS, nil
	case "last_token", "eos", "lasttoken":
		return PoolingLastToken, nil
	}
	return "", fmt.Errorf("unknown pooling %s (want mean, cls or last_token): %w", QuoteInput(s), ErrInvalidRequest)
}

// EmbedOptions adjust one Embed call; zero values take the model's defaults.
type EmbedOptions struct {
	Pooling Pooling
	// Normalize L2-normalizes the vectors; nil takes the model's default.
	Normalize *bool
	// Dimensions > 0 keeps the first Dimensions values of each vector and
	// then L2-normalizes them (Matryoshka truncation), unless Normalize is
	// explicitly false.
	Dimensions int
}

// EmbedResult holds one vector per input text.
type EmbedResult struct {
	Vectors [][]float32
	// Tokens counts the tokens fed to the model (special tokens included,
	// after truncation); Truncated counts the texts that were cut to the
	// model's length.
	Tokens    int
	Truncated int
	Device    string
}

// Scoring turns a classifier's logits into scores.
type Scoring string

// Scorings. A model's default is its own (sigmoid for a multi-label model,
// else softmax).
const (
	ScoringSoftmax Scoring = "softmax"
	ScoringSigmoid Scoring = "sigmoid"
	ScoringNone    Scoring = "none" // raw logits
)

// ParseScoring accepts softmax, sigmoid and none; "" means the model's default.
func ParseScoring(s string) (Scoring, error) {
	switch Scoring(s) {
	case "", ScoringSoftmax, ScoringSigmoid, ScoringNone:
		return Scoring(s), nil
	}
	return "", fmt.Errorf("unknown scoring function %s (want softmax, sigmoid or none): %w", QuoteInput(s), ErrInvalidRequest)
}

// ClassifyOptions adjust one Classify call.
type ClassifyOptions struct {
	// TopK is how many labels to return per text, best first; <= 0 returns all.
	TopK int
	// Function overrides the model's scoring function.
	Function Scoring
}

// LabelScore is one label's score.
type LabelScore struct {
	Label string
	Index int // the model's output index
	Score float64
}

// ClassifyResult holds the labels of each text, best first.
type ClassifyResult struct {
	Results   [][]LabelScore
	Tokens    int
	Truncated int
	Device    string
}

// DefaultHypothesisTemplate is the zero-shot hypothesis template
// transformers.js uses.
const DefaultHypothesisTemplate = "This example is {}."

// ZeroShotOptions adjust one zero-shot call.
type ZeroShotOptions struct {
	// HypothesisTemplate has "{}" where a candidate label goes (its first
	// "{}" only); "" uses DefaultHypothesisTemplate.
	HypothesisTemplate string
	// MultiLabel scores each label on its own (contradiction vs entailment);
	// otherwise the entailment logits are softmaxed across labels. A single
	// candidate label is always scored on its own.
	MultiLabel bool
}

// ZeroShotScores are one text's candidate labels, best first.
type ZeroShotScores struct {
	Sequence string
	Labels   []string
	Scores   []float64
}

// ZeroShotResult holds the labels of each text.
type ZeroShotResult struct {
	Results   []ZeroShotScores
	Tokens    int
	Truncated int
	Device    string
}

// RerankOptions adjust one Rerank call.
type RerankOptions struct {
	// TopN keeps the N most relevant documents; <= 0 keeps all.
	TopN int
	// RawScores returns the cross-encoder's logit instead of sigmoid(logit).
	RawScores bool
}

// RerankScore is one document's relevance.
type RerankScore struct {
	Index int // the document's position in the request
	// Score is sigmoid(logit) in [0, 1] (the logit itself with RawScores).
	Score float64
}

// RerankResult lists documents most relevant first (ties: earlier document
// first).
type RerankResult struct {
	Results   []RerankScore
	Tokens    int
	Truncated int
	Device    string
}

// EarlyStopping is beam search's stopping rule (generation_config.json
// early_stopping: true, false or "never").
type EarlyStopping int

// Stopping rules.
const (
	EarlyStoppingDefault EarlyStopping = iota // the model's generation settings
	// EarlyStoppingTrue stops a text once num_beams hypotheses are finished.
	EarlyStoppingTrue
	// EarlyStoppingFalse stops when no running beam can still beat the worst
	// kept hypothesis, judged at the current length.
	EarlyStoppingFalse
	// EarlyStoppingNever stops only when no running beam can beat it at any
	// length up to the maximum (canonical beam search).
	EarlyStoppingNever
)

// ParseEarlyStopping accepts "true", "false" and "never"; "" is the default.
func ParseEarlyStopping(s string) (EarlyStopping, error) {
	switch s {
	case "":
		return EarlyStoppingDefault, nil
	case "true":
		return EarlyStoppingTrue, nil
	case "false":
		return EarlyStoppingFalse, nil
	case "never":
		return EarlyStoppingNever, nil
	}
	return 0, fmt.Errorf("early_stopping %s (want true, false or never): %w", QuoteInput(s), ErrInvalidRequest)
}

// SummarizeOptions adjust one Summarize call; unset fields (nil or zero) take
// the model's generation settings.
type SummarizeOptions struct {
	MaxNewTokens      int // > 0 limits the generated tokens (EOS included)
	MinNewTokens      *int
	NumBeams          int // 1 = greedy search; > 1 = beam search
	LengthPenalty     *float64
	EarlyStopping     EarlyStopping
	NoRepeatNgramSize *int // 0 turns the model's setting off
	// OnToken, when set, is called after each generated token (greedy search
	// only). An error from it stops generation and is returned.
	OnToken func(TokenEvent) error
}

// TokenEvent is one streamed token. The Text pieces of a summary concatenate
// to its final Text, except where decoding a later token rewrites earlier
// characters (a tokenizer's clean-up of spaces before punctuation can): then
// the piece is "" and Summary.Text is authoritative.
type TokenEvent struct {
	Index   int    // which input text
	TokenID int64  // the token generated (the final EOS included)
	Text    string // the text it adds to the summary so far
}

// Summary is one text's summary.
type Summary struct {
	Text     string
	TokenIDs []int64 // generated ids, without the decoder start token and final EOS
	// FinishReason is "stop" (EOS generated) or "length" (length limit reached).
	FinishReason string
}

// SummarizeResult holds one summary per input text.
type SummarizeResult struct {
	Summaries    []Summary
	InputTokens  int
	OutputTokens int
	Truncated    int
	Device       string
}

// MaxQuoted bounds caller input quoted in an error message, so that no
// error echoes a huge input.
const MaxQuoted = 96

// Clip cuts caller input to at most MaxQuoted bytes on a character boundary,
// marking the cut with "…".
func Clip(s string) string {
	if len(s) <= MaxQuoted {
		return s
	}
	cut := MaxQuoted
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + "…"
}

// QuoteInput is %q of caller input, clipped.
func QuoteInput(s string) string { return strconv.Quote(Clip(s)) }
