// Package engine is modeld's llama.cpp engine, on the yzma binding
// and the libraries that scripts/bootstrap installs. It owns loading a GGUF
// model (after checking the file in Go, so a corrupt file is an error rather
// than a native abort), tokenization, chat templates (llama.cpp's built-in
// matcher, else a Jinja renderer), per-request sampler chains, stop strings,
// and a continuous-batching scheduler: one llama context per model with one
// sequence per slot, every decode step carrying one token of each generating
// sequence plus prompt chunks of newly joined ones, with per-slot prefix reuse.
// Reuse keeps only KV that a fresh prompt evaluation would give bit for bit
// (tokens decoded in steps of two or more; ggml's one-token kernels round
// differently), so greedy output with reuse equals output without it.
// Prompt lookup (lookup.go, speculate.go), when a model's settings or a
// request turn it on, drafts a sequence's next tokens from its own prompt
// and output and verifies them in the same step; each emitted token is
// still the sampler's choice at its position.
//
// Text follows modeld's one UTF-8 rule (internal/utf8text): a character
// split across tokens is held until complete, each byte that cannot begin
// one becomes U+FFFD, and under a grammar no token that would break UTF-8
// is drawn (utf8guard.go), so streamed and whole-output text agree.
//
// The scheduler reaches llama.cpp only through the decoder interface
// (decoder.go: decode a batch, sample, drop KV, read the vocabulary), so its
// admission, queue limit and cancellation are tested with a fake decoder.
// The request, event and error types are those of package backends; the
// settings and descriptions that cross the runner socket (Options, Info,
// Stats) are those of package wire.
//
// A model opened with its multimodal projector (Options.Projector) reads
// images in chat messages through llama.cpp's multimodal library (mtmd,
// vision*.go): images arrive decoded (RGB from internal/imagein), a prompt
// counts each image's tokens as runs of backends.ImageToken, and a prompt
// with images is evaluated whole when it takes a slot and never reused.
//
// It runs inside a runner process (package runner, one per loaded model),
// never in the daemon: native code can still abort on inputs this package
// does not foresee. It must not know of the runner protocol, processes,
// HTTP, OpenAI wire types or the model store, and nothing on the daemon's
// side (package llama) may import it.
//
// Locks: scheduler.mu guards the queue of waiting requests and the closed
// flag and is never held while calling into llama.cpp; Model.life (read by
// vocabulary calls, written by Close) keeps the native model alive while in
// use; neither is taken while holding the other. vision.mu serialises every call
// into the multimodal library (tokenizing on callers' goroutines, encoding on
// the scheduler's); it is taken while holding neither. The scheduler goroutine
// alone owns the llama context, the batch, the slots and their samplers.
package engine
