package models

import (
	"context"
	"log/slog"
	"os"
	"time"
)

// The staging API: what code outside this package that adds models to the
// store (the pulls of package hub) may do. Everything it writes goes through
// these methods, so that the store's invariants stay here: a blob is
// committed only from a checked file, a partial is written only under its
// lock, and a manifest is written only under store.lock once every blob it
// names exists.
//
// A writer calls BeginActive for its whole run, Pin for every blob its
// manifest will name, LockPartial before it touches a partial, and at the
// end CommitPartial (the partial's sha256 was checked) or DropPartial (its
// content was refused), then CommitManifest.

// Files of an ONNX model that a writer needs to recognise in a listing.
const (
	ONNXConfig = onnxConfig // the model's config.json
	ONNXDir    = onnxDir    // the folder of its graphs
)

// Sidecar records what a partial file is, so that a later run can tell
// whether it may continue it, and for ranged downloads which ranges are done.
type Sidecar = sidecar

// Chunk is one range [Start, End) of a ranged download with Done bytes
// written from Start.
type Chunk = chunk

// Logger returns the store's logger.
func (s *Store) Logger() *slog.Logger { return s.log }

// Now returns the store's clock reading, which manifests record.
func (s *Store) Now() time.Time { return s.now() }

// BeginActive marks a pull as running (shared lock on active.lock), so that
// Prune in any process keeps the blobs it adds, until end runs.
func (s *Store) BeginActive(ctx context.Context) (end func(), err error) {
	return s.beginActive(ctx)
}

// Pin keeps blobs (sha256 hex) from being removed by this process's Remove
// and Prune until release runs.
func (s *Store) Pin(hexDigests ...string) (release func()) { return s.pin(hexDigests...) }

// FindGitOID returns the blob (sha256 hex) of a hub file known by its git
// blob id from an earlier pull, or "" when no manifest records it.
func (s *Store) FindGitOID(oid string, size int64) string { return s.findGitOID(oid, size) }

// GoodBlob reports whether blob hexDigest exists with size bytes (-1: any)
// and its bytes match: unchanged since verified, or hashed now.
func (s *Store) GoodBlob(ctx context.Context, hexDigest string, size int64) bool {
	return s.goodBlob(ctx, hexDigest, size)
}

// LockPartial takes the lock of partial name, waiting for another process or
// goroutine that holds it; onWait, when not nil, runs once if it has to wait.
func (s *Store) LockPartial(ctx context.Context, name string, onWait func()) (unlock func(), err error) {
	return s.lockPartial(ctx, name, onWait)
}

// PartialPath returns the partial file of name, which its lock holder may
// create and write.
func (s *Store) PartialPath(name string) string { return s.partialPath(name) }

// ReadSidecar returns the sidecar of partial name, or nil when absent or
// unreadable.
func (s *Store) ReadSidecar(name string) *Sidecar { return s.readSidecar(name) }

// WriteSidecar replaces the sidecar of partial name atomically.
func (s *Store) WriteSidecar(name string, sc *Sidecar) error { return s.writeSidecar(name, sc) }

// DiscardPartial removes partial name and its sidecar; its lock stays held.
func (s *Store) DiscardPartial(name string) error { return s.discardPartial(name) }

// DropPartial removes partial name, its sidecar and its lock file (still
// held by the caller: a waiter retries on a new one): refused content that
// must leave nothing behind.
func (s *Store) DropPartial(name string) error {
	err := s.discardPartial(name)
	s.removeLockFile(name)
	return err
}

// CommitPartial makes partial name, whose sha256 (hex) the caller checked,
// the blob hexDigest, and removes its sidecar and lock file.
func (s *Store) CommitPartial(name, hexDigest string) error {
	if err := s.commitBlob(s.partialPath(name), hexDigest); err != nil {
		return err
	}
	_ = s.discardPartial(name) // the sidecar; the partial itself became the blob
	s.removeLockFile(name)
	return nil
}

// OpenBlob opens blob hexDigest for reading.
func (s *Store) OpenBlob(hexDigest string) (*os.File, error) { return os.Open(s.blobPath(hexDigest)) }

// CommitManifest writes m, replacing a model of the same id (its Created
// time kept, the blobs only it used removed). ErrBlobMissing: a blob m names
// is gone (removed by another process), and should be fetched again.
func (s *Store) CommitManifest(m *Manifest) error { return s.commitManifest(m, true) }

// AddManifest is CommitManifest for a new id only: when m.ID is already a
// model it is left as it is and the error wraps ErrExists. The check and
// the write are one step under the store's lock.
func (s *Store) AddManifest(m *Manifest) error { return s.commitManifest(m, false) }

// CheckModelPath validates a path inside a model: relative, '/'-separated,
// no empty, '.' or '..' element, no control character.
func CheckModelPath(p string) error { return checkModelPath(p) }
