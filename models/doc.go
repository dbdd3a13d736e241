// Package models owns modeld's model store under $MODELD_HOME: content-addressed
// blobs, one manifest per model id, import of local GGUF files and Hugging
// Face-style ONNX folders, verification, listing with per-model disk usage,
// removal and garbage collection, and the checks every model file passes
// before it is stored. Pulls (package models/hub) add models through the
// staging API of stage.go only, so the invariants below are kept here.
//
// Layout of a store rooted at ROOT:
//
//	ROOT/blobs/sha256-<hex>            file contents, named by their sha256
//	ROOT/manifests/<seg>/.../@<tag>.json one manifest per model id (see ParseID)
//	ROOT/partials/<name>.partial       downloads and imports in progress
//	ROOT/partials/<name>.partial.json  what a partial is and which ranges are done
//	ROOT/partials/<name>.lock          held while a process writes that partial
//	ROOT/links/<key>/...               per-model directories of symlinks to blobs (ModelDir)
//	ROOT/store.lock                    held (exclusive) by every store mutation
//	ROOT/active.lock                   held (shared) by running pulls and imports
//
// Invariants: a blob exists only after its sha256 was checked; a manifest is
// written (temp file, fsync, rename, fsync of the directory) only after every
// blob it names exists, under store.lock; removal deletes the manifest first
// and then the blobs no other manifest names. A crash therefore leaves either
// the old state or the new one, plus at most some orphaned blobs, partials or
// temporary files that Prune removes. Readers (List, Get) take no lock.
//
// The package reads no environment variables, touches no network and prints
// nothing: callers consume Progress events. It must not load models
// or know about the daemon; the api package unloads a model before it asks
// the store to remove it.
package models
