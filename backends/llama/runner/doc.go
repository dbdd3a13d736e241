// Package runner is the runner process of the llama backend (`modeld
// runner`): it loads one GGUF model with package engine and serves it to
// the daemon that started it over the protocol of package wire, on a unix
// socket, until the daemon stops it, closes its stdin or dies.
//
// It owns the server side of the protocol and the process's lifetime
// (readiness line, parent watch, shutdown). It must not be imported by the
// daemon's side (package llama), only by the `modeld runner` command and by
// tests that run a runner in their own binary.
package runner
