// Package llama is the daemon's side of the llama.cpp backend: it registers
// the backend "llama" in package backends, starts one runner process per
// loaded GGUF model (`modeld runner`, package runner) and supervises it
// (start, readiness, the stall watchdog and its health report, stop, the
// exit status, the cause of a crash and its report file, the tail of its
// stderr), and is the client of the runner's socket (package wire), whose
// stream lines it reads within a bound.
// A Runner has the methods of the engine's Model, with the same errors, so
// a crash of native code costs one model, never the daemon.
//
// It owns no native code and must not import package engine (nor the
// llama.cpp binding): the daemon's process never loads libllama. It knows
// nothing of HTTP routes of the API, OpenAI wire types or the model store.
//
// Locks: a Runner's state is atomic flags and channels, except its health
// (one mutex, held to read or replace it); the stderr tail and the crash
// capture each have their own mutex, held only to append a line or read it.
// None is held while another is taken.
package llama
