// Package wire is the runner protocol of the llama backend, shared by its
// two ends: the daemon (package llama) and the runner process (package
// runner). It owns the routes, the start status line, the flags a runner
// is started with (Config), the JSON forms of requests, events and errors
// (errors.Is and errors.As give the same answers on both ends), and the
// engine's settings and descriptions that cross the socket (Options, Info,
// Stats) with the engine's own sentinel errors.
//
// It is plain data: it must not import the engine, start processes or do
// I/O beyond encoding, so both ends can import it.
package wire
