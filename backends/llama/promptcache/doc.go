// Package promptcache keeps the KV state of long prompt prefixes on disk,
// so that a prompt survives the loss of its slot: a model unloaded by
// keep-alive or memory pressure, a slot evicted, the daemon restarted. It
// owns the file format, the reading of a file as untrusted input, the
// directory (private to the daemon's user), the choice of the entry that
// shares the longest prefix with a prompt, and the bound on the bytes kept
// (a size setting and the free disk, least recently used entries going
// first). It also writes entries on a goroutine of its own, so that the
// decode loop only copies the state into memory.
//
// An entry is keyed by the model file's sha256 and its KV configuration (a
// text the engine builds: library version, KV types, context, layers, ...);
// the token prefix is stored in the file and compared token by token. A
// file is loaded only when its magic, version, key, sizes and the checksum
// over all of it agree, and only when it is a regular file of this user
// that nobody else may read or write; anything else is removed (or, when
// not ours, left alone) with a log line, never handed on.
//
// It must not call into llama.cpp (the engine hands it bytes and gets
// bytes back) and knows nothing of slots, HTTP or the model store.
package promptcache
