package models

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/gofrs/flock"
)

// Partial files live in partials/ as <name>.partial, with <name>.partial.json
// describing them and <name>.lock held by the process writing them.
const (
	partialExt = ".partial"
	sidecarExt = ".partial.json"
	lockExt    = ".lock"
)

// partialPath returns the partial file of name.
func (s *Store) partialPath(name string) string {
	return filepath.Join(s.root, dirPartials, name+partialExt)
}

// lockPartial takes the lock of partial name, waiting for another process or
// goroutine that holds it. The lock file stays (Prune removes unlocked ones);
// a lock taken on a file Prune unlinked meanwhile is retried.
func (s *Store) lockPartial(ctx context.Context, name string, onWait func()) (func(), error) {
	path := filepath.Join(s.root, dirPartials, name+lockExt)
	for {
		fl := flock.New(path)
		ok, err := fl.TryLock()
		if err == nil && !ok {
			if onWait != nil {
				onWait()
				onWait = nil
			}
			ok, err = fl.TryLockContext(ctx, 100*time.Millisecond)
		}
		if err != nil || !ok {
			_ = fl.Close()
			return nil, fmt.Errorf("lock partial %s: %w", name, errors.Join(err, ctx.Err()))
		}
		held, herr := fl.Stat()
		now, nerr := os.Stat(path)
		if herr == nil && nerr == nil && os.SameFile(held, now) {
			return func() {
				_ = fl.Unlock() // closing releases it too
				_ = fl.Close()
			}, nil
		}
		_ = fl.Unlock()
		_ = fl.Close()
		if err := ctx.Err(); err != nil {
			return nil, err
		}
	}
}

// removeLockFile removes the lock file of a partial nobody else can know
// (imports use random names).
func (s *Store) removeLockFile(name string) {
	_ = os.Remove(filepath.Join(s.root, dirPartials, name+lockExt)) // Prune removes it otherwise
}

// sidecar records what a partial file is, so that a later run can tell
// whether it may continue it, and for parallel downloads which ranges are done.
type sidecar struct {
	Source string  `json:"source"`           // the file's hub path or URL
	Digest string  `json:"digest,omitempty"` // expected "sha256:<hex>"
	ETag   string  `json:"etag,omitempty"`   // validator from the server
	Size   int64   `json:"size"`             // expected total size, -1 unknown
	Chunks []chunk `json:"chunks,omitempty"` // parallel download: one entry per range
}

// chunk is one range [Start, End) of a parallel download with Done bytes
// written from Start.
type chunk struct {
	Start int64 `json:"start"`
	End   int64 `json:"end"`
	Done  int64 `json:"done"`
}

func (s *Store) sidecarPath(name string) string {
	return filepath.Join(s.root, dirPartials, name+sidecarExt)
}

// readSidecar returns the sidecar of name, or nil when absent or unreadable.
func (s *Store) readSidecar(name string) *sidecar {
	data, err := os.ReadFile(s.sidecarPath(name))
	if err != nil {
		return nil
	}
	var sc sidecar
	if err := json.Unmarshal(data, &sc); err != nil {
		return nil
	}
	return &sc
}

// writeSidecar replaces the sidecar of name atomically. The partial's data
// must already be written (fsync not needed: a lost page fails the final
// sha256 check and the file is fetched again).
func (s *Store) writeSidecar(name string, sc *sidecar) error {
	data, err := json.Marshal(sc)
	if err != nil {
		return fmt.Errorf("encode sidecar: %w", err)
	}
	path := s.sidecarPath(name)
	tmp := path + "." + randomSuffix()
	if err := os.WriteFile(tmp, data, 0o644); err != nil {
		return fmt.Errorf("write sidecar: %w", err)
	}
	if err := os.Rename(tmp, path); err != nil {
		_ = os.Remove(tmp)
		return fmt.Errorf("write sidecar: %w", err)
	}
	return nil
}

// discardPartial removes a partial and its sidecar.
func (s *Store) discardPartial(name string) error {
	var errs []error
	for _, p := range []string{s.partialPath(name), s.sidecarPath(name)} {
		if err := os.Remove(p); err != nil && !errors.Is(err, fs.ErrNotExist) {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// partialBase returns the name of a file in partials/ without its extension,
// and whether it is a lock file.
func partialBase(file string) (string, bool) {
	switch {
	case strings.HasSuffix(file, lockExt):
		return strings.TrimSuffix(file, lockExt), true
	case strings.HasSuffix(file, sidecarExt):
		return strings.TrimSuffix(file, sidecarExt), false
	case strings.HasSuffix(file, partialExt):
		return strings.TrimSuffix(file, partialExt), false
	}
	if i := strings.LastIndex(file, sidecarExt+"."); i > 0 { // a sidecar temp file
		return file[:i], false
	}
	return file, false
}
