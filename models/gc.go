package models

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/gofrs/flock"
)

// RemoveReport says what Remove did.
type RemoveReport struct {
	ID    string   `json:"id"`
	Freed int64    `json:"freed"`          // bytes of blobs removed
	Kept  []string `json:"kept,omitempty"` // files kept because another model uses their blob
	// CorruptManifest: the manifest could not be read; it was removed, and
	// the blobs it named as far as could be read. Those it named unreadably
	// are orphans now: Prune removes them.
	CorruptManifest bool `json:"corrupt_manifest,omitempty"`
}

// Remove deletes the model id: its manifest first, then every blob of it no
// other manifest names (and no pull or import in this process is adding).
// A corrupt manifest (ErrCorruptManifest) is removed too. It does not know
// about loaded models: the daemon unloads first.
func (s *Store) Remove(ctx context.Context, id string) (*RemoveReport, error) {
	pid, err := ParseID(id)
	if err != nil {
		return nil, err
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	unlock, err := s.lockStore()
	if err != nil {
		return nil, err
	}
	defer unlock()
	m, err := s.get(pid)
	corrupt := errors.Is(err, ErrCorruptManifest)
	if corrupt {
		s.log.Warn("models: removing a corrupt manifest", "id", pid.String(), "err", err)
		m = &Manifest{ID: pid.String()}
		if data, rerr := readManifestFile(s.manifestPath(pid)); rerr == nil {
			for _, h := range manifestDigests(data) {
				m.Files = append(m.Files, File{Path: blobNamePrefix + h, Digest: DigestPrefix + h})
			}
		}
	} else if err != nil {
		return nil, err
	}
	path := s.manifestPath(pid)
	if err := os.Remove(path); err != nil {
		return nil, fmt.Errorf("remove manifest of %s: %w", pid, err)
	}
	if err := syncDir(filepath.Dir(path)); err != nil {
		return nil, err
	}
	removeEmptyParents(filepath.Dir(path), filepath.Join(s.root, dirManifests))
	if !corrupt { // a corrupt manifest's links directory goes with the next Prune
		if err := os.RemoveAll(filepath.Join(s.root, dirLinks, linkKey(m))); err != nil {
			s.log.Warn("models: remove model directory", "id", m.ID, "err", err)
		}
	}
	freed, err := s.removeUnreferenced(m)
	rep := &RemoveReport{ID: m.ID, Freed: freed, CorruptManifest: corrupt}
	for _, f := range m.Files {
		if h, perr := parseDigest(f.Digest); perr == nil && s.hasBlob(h, -1) {
			rep.Kept = append(rep.Kept, f.Path)
		}
	}
	if err != nil {
		return rep, fmt.Errorf("remove %s: manifest removed, some blobs kept: %w", pid, err)
	}
	return rep, nil
}

// PruneReport says what Prune removed.
type PruneReport struct {
	Removed []Entry `json:"removed"`
	Freed   int64   `json:"freed"`
	// OrphansKept is set when a pull or import was running (in any process):
	// blobs no manifest names yet may be that operation's, so none were removed.
	OrphansKept bool `json:"orphans_kept,omitempty"`
	// PartialsInUse counts partial downloads skipped because a running pull holds them.
	PartialsInUse int `json:"partials_in_use,omitempty"`
	// CorruptManifests are the ids whose manifest could not be read and was removed.
	CorruptManifests []string `json:"corrupt_manifests,omitempty"`
}

// Prune removes orphaned blobs (no manifest names them), partial downloads
// and imports no running operation holds (with their sidecars and locks), and
// temporary files left by a crash. It reports the bytes freed.
func (s *Store) Prune(ctx context.Context) (*PruneReport, error) {
	unlock, err := s.lockStore()
	if err != nil {
		return nil, err
	}
	defer unlock()
	rep := &PruneReport{}
	var errs []error
	remove := func(path string) {
		fi, err := os.Lstat(path)
		if err != nil {
			return
		}
		if err := os.Remove(path); err != nil && !errors.Is(err, fs.ErrNotExist) {
			errs = append(errs, err)
			return
		}
		rel, _ := filepath.Rel(s.root, path)
		rep.Removed = append(rep.Removed, Entry{Path: filepath.ToSlash(rel), Size: fi.Size()})
		rep.Freed += fi.Size()
	}

	// Orphaned blobs, only when no pull or import runs anywhere.
	act := flock.New(filepath.Join(s.root, fileActLck))
	idle, lerr := act.TryLock()
	if lerr != nil {
		errs = append(errs, fmt.Errorf("check for running pulls: %w", lerr))
	}
	ms, bad, err := s.scanAll()
	if err != nil {
		_ = act.Close()
		return nil, err
	}
	// Corrupt manifests go (their blobs are orphans then); those of a newer
	// modeld stay, with the blobs they name.
	var kept []badManifest
	for _, b := range bad {
		if !b.corrupt() {
			kept = append(kept, b)
			continue
		}
		s.log.Warn("models: prune removes a corrupt manifest", "id", b.id, "err", b.err)
		remove(b.path)
		rep.CorruptManifests = append(rep.CorruptManifests, b.id)
	}
	refs := references(ms)
	badReferences(refs, kept)
	errs = append(errs, s.pruneLinks(ms))
	blobs := filepath.Join(s.root, dirBlobs)
	entries, err := os.ReadDir(blobs)
	if err != nil {
		errs = append(errs, err)
	}
	for _, e := range entries {
		if ctx.Err() != nil {
			break
		}
		name := e.Name()
		h, isBlob := strings.CutPrefix(name, blobNamePrefix)
		switch {
		case !isBlob || !IsSHA256Hex(h):
			remove(filepath.Join(blobs, name)) // temp or stray file
		case len(refs[h]) > 0 || s.pinned(h):
		case idle:
			remove(filepath.Join(blobs, name))
			s.removeStamp(h)
		default:
			rep.OrphansKept = true
		}
	}
	if idle {
		_ = act.Unlock()
	}
	_ = act.Close()
	if len(rep.Removed) > 0 {
		errs = append(errs, syncDir(blobs))
	}

	// Verification records of blobs that are gone.
	s.pruneStamps(remove)

	// Temporary manifest files and empty manifest directories.
	mdir := filepath.Join(s.root, dirManifests)
	var dirs []string
	werr := filepath.WalkDir(mdir, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return nil // keep going; what cannot be read is left
		}
		if d.IsDir() {
			if path != mdir {
				dirs = append(dirs, path)
			}
			return nil
		}
		rel, _ := filepath.Rel(mdir, path)
		if _, ok := idFromManifestRel(rel); !ok && strings.HasPrefix(d.Name(), tmpPrefix) {
			remove(path)
		}
		return nil
	})
	errs = append(errs, werr)
	sort.Sort(sort.Reverse(sort.StringSlice(dirs))) // deepest first
	for _, d := range dirs {
		_ = os.Remove(d) // fails when not empty: kept
	}

	// Partials nobody holds.
	pdir := filepath.Join(s.root, dirPartials)
	pentries, err := os.ReadDir(pdir)
	if err != nil {
		errs = append(errs, err)
	}
	groups := make(map[string][]string)
	for _, e := range pentries {
		base, _ := partialBase(e.Name())
		groups[base] = append(groups[base], filepath.Join(pdir, e.Name()))
	}
	for base, files := range groups {
		fl := flock.New(filepath.Join(pdir, base+lockExt))
		ok, err := fl.TryLock()
		if err != nil || !ok {
			_ = fl.Close()
			rep.PartialsInUse++
			continue
		}
		for _, f := range files {
			remove(f)
		}
		remove(filepath.Join(pdir, base+lockExt)) // created by TryLock when absent
		_ = fl.Unlock()
		_ = fl.Close()
	}
	sort.Slice(rep.Removed, func(i, j int) bool { return rep.Removed[i].Path < rep.Removed[j].Path })
	return rep, errors.Join(errs...)
}
