package models

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"sort"
	"sync"
	"time"

	"github.com/gofrs/flock"
)

// Directory and file names under the store root.
const (
	dirBlobs     = "blobs"
	dirManifests = "manifests"
	dirPartials  = "partials"
	fileStoreLck = "store.lock"
	fileActLck   = "active.lock"
)

// Options configures a Store. The zero value is usable.
type Options struct {
	Logger *slog.Logger     // default slog.Default()
	Now    func() time.Time // default time.Now; manifests record it
}

// Store is a model store rooted at a directory. It is safe for concurrent use
// by goroutines and by several processes sharing the directory.
//
// Lock order: Store.mu, then store.lock (file); pins has its own mutex, taken
// alone or inside those. Pulls and imports hold active.lock shared for their
// whole run; Prune takes it exclusive without waiting.
type Store struct {
	root string
	log  *slog.Logger
	now  func() time.Time

	mu sync.Mutex // this process's store mutations, before store.lock

	pinMu sync.Mutex
	pins  map[string]int // blob hex -> in-process pulls/imports that need it

	hooks testHooks
}

// testHooks lets tests of this package interrupt the store at chosen points.
type testHooks struct {
	beforeManifestRename func(tmp string) error
	cheapHash            int64                  // instead of cheapHash when not 0
	blobHashed           func(hexDigest string) // after a stored blob was hashed again
}

// Open opens (creating if needed) the store rooted at root.
func Open(root string, opts Options) (*Store, error) {
	if root == "" {
		return nil, errors.New("models: empty store root")
	}
	abs, err := filepath.Abs(root)
	if err != nil {
		return nil, fmt.Errorf("models: store root: %w", err)
	}
	for _, d := range []string{abs, filepath.Join(abs, dirBlobs), filepath.Join(abs, dirManifests), filepath.Join(abs, dirPartials)} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return nil, fmt.Errorf("models: create %s: %w", d, err)
		}
	}
	s := &Store{root: abs, log: opts.Logger, now: opts.Now, pins: make(map[string]int)}
	if s.log == nil {
		s.log = slog.Default()
	}
	if s.now == nil {
		s.now = time.Now
	}
	return s, nil
}

// Root returns the store's root directory.
func (s *Store) Root() string { return s.root }

// lockStore takes the store mutation lock (in-process mutex, then the file
// lock) and returns its release.
func (s *Store) lockStore() (func(), error) {
	s.mu.Lock()
	fl := flock.New(filepath.Join(s.root, fileStoreLck))
	if err := fl.Lock(); err != nil {
		s.mu.Unlock()
		return nil, fmt.Errorf("lock store: %w", err)
	}
	return func() {
		if err := fl.Unlock(); err != nil {
			s.log.Warn("models: unlock store", "err", err)
		}
		_ = fl.Close() // the fd only held the lock
		s.mu.Unlock()
	}, nil
}

// beginActive marks a pull or import as running (shared lock on
// active.lock) so that Prune in any process keeps the blobs it is adding.
func (s *Store) beginActive(ctx context.Context) (func(), error) {
	fl := flock.New(filepath.Join(s.root, fileActLck))
	ok, err := fl.TryRLockContext(ctx, 50*time.Millisecond)
	if err != nil || !ok {
		_ = fl.Close()
		return nil, fmt.Errorf("mark store active: %w", errors.Join(err, ctx.Err()))
	}
	return func() {
		_ = fl.Unlock() // closing the fd releases the lock anyway
		_ = fl.Close()
	}, nil
}

// pin keeps blobs from being removed by this process's Remove and Prune
// until the returned function runs.
func (s *Store) pin(hexDigests ...string) func() {
	s.pinMu.Lock()
	for _, h := range hexDigests {
		s.pins[h]++
	}
	s.pinMu.Unlock()
	return func() {
		s.pinMu.Lock()
		for _, h := range hexDigests {
			if s.pins[h]--; s.pins[h] <= 0 {
				delete(s.pins, h)
			}
		}
		s.pinMu.Unlock()
	}
}

// pinSet collects pin releases of one operation.
type pinSet struct{ releases []func() }

func (p *pinSet) add(release func()) { p.releases = append(p.releases, release) }

func (p *pinSet) release() {
	for _, r := range p.releases {
		r()
	}
	p.releases = nil
}

func (s *Store) pinned(hexDigest string) bool {
	s.pinMu.Lock()
	defer s.pinMu.Unlock()
	return s.pins[hexDigest] > 0
}

// manifestPath returns the manifest file of id.
func (s *Store) manifestPath(id ID) string {
	return filepath.Join(s.root, dirManifests, id.manifestRel())
}

// Get returns the manifest of the model id. ErrNotFound when absent,
// ErrInvalidID when id is not valid.
func (s *Store) Get(id string) (*Manifest, error) {
	pid, err := ParseID(id)
	if err != nil {
		return nil, err
	}
	return s.get(pid)
}

// get reads the manifest of id. A manifest that does not decode, or names
// another id, is ErrCorruptManifest (Remove deletes it all the same).
func (s *Store) get(id ID) (*Manifest, error) {
	data, err := readManifestFile(s.manifestPath(id))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("%w: %s", ErrNotFound, id)
	}
	if err != nil {
		return nil, fmt.Errorf("read manifest of %s: %w", id, err)
	}
	m, err := decodeManifest(data)
	if err != nil {
		return nil, fmt.Errorf("%s: %w (modeld rm %s removes it)", id, err, id)
	}
	if m.ID != id.String() {
		return nil, fmt.Errorf("%w: the manifest of %s names %q (modeld rm %s removes it)", ErrCorruptManifest, id, shortText(m.ID), id)
	}
	return m, nil
}

// readManifestFile reads a manifest file of at most maxManifestSize bytes
// (one byte more tells decodeManifest it is too large).
func readManifestFile(path string) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close() //nolint:errcheck // read-only
	return io.ReadAll(io.LimitReader(f, maxManifestSize+1))
}

// List returns every model's manifest, sorted by id. A manifest that cannot
// be read is logged and left out (Unreadable lists those).
func (s *Store) List() ([]*Manifest, error) {
	return s.scanManifests()
}

// UnreadableManifest is a manifest file List leaves out.
type UnreadableManifest struct {
	ID      string `json:"id"`
	Path    string `json:"path"`    // relative to the store root
	Corrupt bool   `json:"corrupt"` // Remove and Prune delete it; false: written by a newer modeld, kept
	Error   string `json:"error"`
}

// Unreadable lists the manifests that List leaves out, and why.
func (s *Store) Unreadable() ([]UnreadableManifest, error) {
	_, bad, err := s.scanAll()
	if err != nil {
		return nil, err
	}
	out := make([]UnreadableManifest, 0, len(bad))
	for _, b := range bad {
		rel, _ := filepath.Rel(s.root, b.path)
		out = append(out, UnreadableManifest{ID: b.id, Path: filepath.ToSlash(rel), Corrupt: b.corrupt(), Error: b.err.Error()})
	}
	return out, nil
}

// badManifest is a manifest file that did not decode.
type badManifest struct {
	id      string
	path    string
	err     error
	digests []string // what manifestDigests could read of it
}

// corrupt says whether Prune may delete it: not one of a newer modeld.
func (b badManifest) corrupt() bool { return !errors.Is(b.err, errManifestTooNew) }

// scanManifests reads every manifest on disk, leaving out (and logging) those
// that do not decode.
func (s *Store) scanManifests() ([]*Manifest, error) {
	ms, _, err := s.scanAll()
	return ms, err
}

// scanAll reads every manifest on disk: those that decode, and those that do not.
func (s *Store) scanAll() ([]*Manifest, []badManifest, error) {
	dir := filepath.Join(s.root, dirManifests)
	var out []*Manifest
	var bad []badManifest
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			if errors.Is(err, fs.ErrNotExist) {
				return nil // removed while walking
			}
			return err
		}
		if d.IsDir() {
			return nil
		}
		rel, err := filepath.Rel(dir, path)
		if err != nil {
			return err
		}
		id, ok := idFromManifestRel(rel)
		if !ok {
			return nil
		}
		data, err := readManifestFile(path)
		if errors.Is(err, fs.ErrNotExist) {
			return nil
		}
		if err != nil {
			return err
		}
		m, err := decodeManifest(data)
		if err == nil && m.ID != id.String() {
			err = fmt.Errorf("%w: manifest at %s names %q", ErrCorruptManifest, rel, shortText(m.ID))
		}
		if err != nil {
			s.log.Warn("models: skipping unreadable manifest", "path", path, "err", err)
			bad = append(bad, badManifest{id: id.String(), path: path, err: err, digests: manifestDigests(data)})
			return nil
		}
		out = append(out, m)
		return nil
	})
	if err != nil {
		return nil, nil, fmt.Errorf("list manifests: %w", err)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	sort.Slice(bad, func(i, j int) bool { return bad[i].id < bad[j].id })
	return out, bad, nil
}

// badReferences adds to refs the blobs that unreadable manifests seem to
// name, so that removing another model or pruning never takes them: a newer
// modeld's model keeps its files, and a corrupt manifest's blobs go only
// with it.
func badReferences(refs map[string][]string, bad []badManifest) {
	for _, b := range bad {
		for _, h := range b.digests {
			refs[h] = append(refs[h], b.id)
		}
	}
}

// references maps blob hex digests to the ids of the models that use them.
func references(ms []*Manifest) map[string][]string {
	refs := make(map[string][]string)
	for _, m := range ms {
		seen := make(map[string]bool)
		for _, f := range m.Files {
			h, err := parseDigest(f.Digest)
			if err != nil || seen[h] {
				continue
			}
			seen[h] = true
			refs[h] = append(refs[h], m.ID)
		}
	}
	return refs
}

// findGitOID returns the blob (sha256 hex) of a hub file known by its git
// blob id from an earlier pull, or "" when no manifest records it.
func (s *Store) findGitOID(oid string, size int64) string {
	ms, err := s.scanManifests()
	if err != nil {
		return ""
	}
	for _, m := range ms {
		for _, f := range m.Files {
			if f.GitOID == oid && f.Size == size {
				if h, err := parseDigest(f.Digest); err == nil {
					return h
				}
			}
		}
	}
	return ""
}

// ErrBlobMissing is returned by CommitManifest when a blob the manifest names
// vanished (removed by another process); pulls fetch it again.
var ErrBlobMissing = errors.New("blob missing")

// commitManifest writes m under the store lock after checking that every
// blob it names exists. An existing manifest of the same id is replaced only
// when replace is set (else ErrExists); its Created time is kept, and blobs
// only it used are removed.
func (s *Store) commitManifest(m *Manifest, replace bool) error {
	id, err := ParseID(m.ID)
	if err != nil {
		return err
	}
	unlock, err := s.lockStore()
	if err != nil {
		return err
	}
	defer unlock()
	for _, f := range m.Files {
		h, err := parseDigest(f.Digest)
		if err != nil {
			return err
		}
		if !s.hasBlob(h, f.Size) {
			return fmt.Errorf("%w: %s (%s)", ErrBlobMissing, f.Path, f.Digest)
		}
	}
	old, err := s.get(id)
	switch {
	case err == nil && !replace:
		return fmt.Errorf("%w: %s (remove it first, or replace it)", ErrExists, id)
	case err == nil:
		m.Created = old.Created
	case errors.Is(err, ErrNotFound):
		old = nil
	default:
		s.log.Warn("models: replacing unreadable manifest", "id", id.String(), "err", err)
		old = nil
	}
	data, err := encodeManifest(m)
	if err != nil {
		return err
	}
	if err := writeFileAtomic(s.manifestPath(id), data, s.hooks.beforeManifestRename); err != nil {
		return fmt.Errorf("write manifest of %s: %w", id, err)
	}
	if old != nil {
		if _, err := s.removeUnreferenced(old); err != nil {
			s.log.Warn("models: blobs of the replaced manifest kept", "id", id.String(), "err", err)
		}
	}
	return nil
}

// removeUnreferenced removes the blobs of m that no manifest on disk names
// and no in-process operation pinned. Called with the store lock held, after
// m's manifest was removed or replaced. It returns the bytes freed.
func (s *Store) removeUnreferenced(m *Manifest) (int64, error) {
	ms, bad, err := s.scanAll()
	if err != nil {
		return 0, err
	}
	refs := references(ms)
	badReferences(refs, bad)
	var freed int64
	var errs []error
	removed := false
	for _, f := range m.Files {
		h, err := parseDigest(f.Digest)
		if err != nil || len(refs[h]) > 0 || s.pinned(h) {
			continue
		}
		p := s.blobPath(h)
		fi, err := os.Stat(p)
		if err != nil {
			continue // already gone (listed twice, or removed elsewhere)
		}
		if err := os.Remove(p); err != nil {
			errs = append(errs, fmt.Errorf("remove blob %s: %w", h, err))
			continue
		}
		s.removeStamp(h)
		freed += fi.Size()
		removed = true
	}
	if removed {
		if err := syncDir(filepath.Join(s.root, dirBlobs)); err != nil {
			errs = append(errs, err)
		}
	}
	return freed, errors.Join(errs...)
}
