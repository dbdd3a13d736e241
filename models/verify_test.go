package models

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// importTiny imports the tiny GGUF as id and returns its manifest and blob path.
func importTiny(t *testing.T, s *Store, id string, data []byte) (*Manifest, string) {
	t.Helper()
	m, err := s.Import(context.Background(), writeTemp(t, "m.gguf", data), ImportOptions{Name: id}, nil)
	if err != nil {
		t.Fatal(err)
	}
	blob, err := s.FilePath(m, m.Files[0].Path)
	if err != nil {
		t.Fatal(err)
	}
	return m, blob
}

func TestVerifyFindsFlippedByte(t *testing.T) {
	s := newTestStore(t)
	data := tinyGGUF(t)
	m, blob := importTiny(t, s, "org/tiny", data)
	other, _ := importTiny(t, s, "org/other", ggufSeed(t, 7))
	rep, err := s.Verify(context.Background(), "")
	if err != nil || !rep.OK() || len(rep.Checks) != 2 {
		t.Fatalf("fresh store: %+v, %v", rep, err)
	}
	flipByte(t, blob, int64(len(data)/2))
	for _, id := range []string{"", "org/tiny"} {
		rep, err = s.Verify(context.Background(), id)
		if err != nil {
			t.Fatal(err)
		}
		if rep.OK() {
			t.Fatalf("Verify(%q) found nothing: %+v", id, rep)
		}
		var bad []BlobCheck
		for _, c := range rep.Checks {
			if c.Status != CheckOK {
				bad = append(bad, c)
			}
		}
		if len(bad) != 1 || bad[0].Model != m.ID || bad[0].Status != CheckCorrupt || bad[0].Digest != m.Files[0].Digest ||
			bad[0].Got == "" || bad[0].Got == bad[0].Digest || bad[0].GotSize != int64(len(data)) {
			t.Errorf("Verify(%q) checks %+v", id, rep.Checks)
		}
	}
	if rep, err := s.Verify(context.Background(), other.ID); err != nil || !rep.OK() {
		t.Errorf("the intact model: %+v, %v", rep, err)
	}
	// A missing blob is reported too.
	if err := os.Remove(blob); err != nil {
		t.Fatal(err)
	}
	rep, err = s.Verify(context.Background(), "org/tiny")
	if err != nil || rep.OK() || rep.Checks[0].Status != CheckMissing {
		t.Errorf("missing blob: %+v, %v", rep, err)
	}
	if _, err := s.Verify(context.Background(), "no/such"); !errors.Is(err, ErrNotFound) {
		t.Errorf("unknown id: %v", err)
	}
}

func TestVerifyForLoad(t *testing.T) {
	s := newTestStore(t)
	s.hooks.cheapHash = 1 // every test blob counts as large: only changed files are hashed
	var hashed int
	s.hooks.blobHashed = func(string) { hashed++ }
	data := tinyGGUF(t)
	m, blob := importTiny(t, s, "org/tiny", data)
	ctx := context.Background()

	if err := s.VerifyForLoad(ctx, m); err != nil || hashed != 0 {
		t.Fatalf("fresh import: %v, %d blobs hashed (want 0: verified when written)", err, hashed)
	}
	flipByte(t, blob, 100)
	err := s.VerifyForLoad(ctx, m)
	if !errors.Is(err, ErrCorruptBlob) || hashed != 1 {
		t.Fatalf("flipped byte: %v, %d hashed; want ErrCorruptBlob after hashing the changed file", err, hashed)
	}
	for _, want := range []string{m.Files[0].Digest, "modeld verify org/tiny", "does not match its digest"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error lacks %q: %v", want, err)
		}
	}
	if st := ErrCorruptBlob.HTTPStatus(); st != 500 {
		t.Errorf("status %d", st)
	}
	// Known bad: refused again without hashing.
	if err := s.VerifyForLoad(ctx, m); !errors.Is(err, ErrCorruptBlob) || hashed != 1 {
		t.Errorf("second load: %v, %d hashed", err, hashed)
	}
	// The byte flipped back: the file changed again, is hashed and passes.
	flipByte(t, blob, 100)
	if err := s.VerifyForLoad(ctx, m); err != nil || hashed != 2 {
		t.Errorf("restored blob: %v, %d hashed", err, hashed)
	}
	// A truncated blob is refused by its size alone.
	if err := os.Chmod(blob, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Truncate(blob, 10); err != nil {
		t.Fatal(err)
	}
	if err := s.VerifyForLoad(ctx, m); !errors.Is(err, ErrCorruptBlob) || !strings.Contains(err.Error(), "10 bytes") {
		t.Errorf("truncated blob: %v", err)
	}
	if err := os.Remove(blob); err != nil {
		t.Fatal(err)
	}
	if err := s.VerifyForLoad(ctx, m); !errors.Is(err, ErrCorruptBlob) {
		t.Errorf("missing blob: %v", err)
	}
}

// A blob without a verification record (a store written before records
// existed) and a small blob are hashed before a load; the record then saves
// a large one the work.
func TestVerifyForLoadHashesUnrecordedAndSmallBlobs(t *testing.T) {
	s := newTestStore(t)
	var hashed int
	s.hooks.blobHashed = func(string) { hashed++ }
	m, _ := importTiny(t, s, "org/tiny", tinyGGUF(t))
	ctx := context.Background()
	if err := s.VerifyForLoad(ctx, m); err != nil || hashed != 1 {
		t.Fatalf("small blob: %v, %d hashed (want 1: hashed on every load)", err, hashed)
	}
	s.hooks.cheapHash = 1
	h, _ := parseDigest(m.Files[0].Digest)
	if err := os.Remove(s.stampPath(h)); err != nil {
		t.Fatal(err)
	}
	if err := s.VerifyForLoad(ctx, m); err != nil || hashed != 2 {
		t.Fatalf("no record: %v, %d hashed", err, hashed)
	}
	if err := s.VerifyForLoad(ctx, m); err != nil || hashed != 2 {
		t.Errorf("recorded: %v, %d hashed", err, hashed)
	}
}

// corruptions are what a crash, a full disk or a stray write leave of a manifest.
var corruptions = map[string]func(valid []byte) []byte{
	"truncated": func(b []byte) []byte { return b[:len(b)/2] },
	"empty":     func([]byte) []byte { return nil },
	"garbage":   func([]byte) []byte { return []byte("\x00\xff garbage {{{") },
	"no-files": func(b []byte) []byte {
		return []byte(strings.Replace(string(b), `"files"`, `"filez"`, 1))
	},
	"other-id": func(b []byte) []byte {
		return []byte(strings.Replace(string(b), `"id": "org/bad"`, `"id": "org/good"`, 1))
	},
	"bad-digest": func(b []byte) []byte {
		return []byte(strings.Replace(string(b), `"digest": "sha256:`, `"digest": "sha256:../../`, 1))
	},
	"bad-json-type": func(b []byte) []byte {
		return []byte(strings.Replace(string(b), `"schema_version": 1`, `"schema_version": "one"`, 1))
	},
}

func TestRemoveCorruptManifest(t *testing.T) {
	for name, corrupt := range corruptions {
		t.Run(name, func(t *testing.T) {
			s := newTestStore(t)
			importTiny(t, s, "org/good", tinyGGUF(t))
			bad, _ := importTiny(t, s, "org/bad", ggufSeed(t, 3))
			path := s.manifestPath(ID{Name: "org/bad", Tag: DefaultTag})
			valid, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			writeFile(t, path, corrupt(valid))

			ms, err := s.List()
			if err != nil || len(ms) != 1 || ms[0].ID != "org/good" {
				t.Fatalf("List with a corrupt manifest: %v, %v", ms, err)
			}
			un, err := s.Unreadable()
			if err != nil || len(un) != 1 || un[0].ID != "org/bad" || !un[0].Corrupt {
				t.Errorf("Unreadable: %+v, %v", un, err)
			}
			if _, err := s.Get("org/bad"); !errors.Is(err, ErrCorruptManifest) {
				t.Errorf("Get: %v, want ErrCorruptManifest", err)
			}
			rep, err := s.Remove(context.Background(), "org/bad")
			if err != nil || !rep.CorruptManifest {
				t.Fatalf("Remove: %+v, %v", rep, err)
			}
			if _, err := os.Stat(path); !os.IsNotExist(err) {
				t.Errorf("manifest still there: %v", err)
			}
			// Whatever Remove could not attribute, Prune frees.
			if _, err := s.Prune(context.Background()); err != nil {
				t.Fatal(err)
			}
			badBlob := s.blobPath(strings.TrimPrefix(bad.Files[0].Digest, DigestPrefix))
			if _, err := os.Stat(badBlob); !os.IsNotExist(err) {
				t.Errorf("the removed model's blob stays: %v", err)
			}
			if rep, err := s.Verify(context.Background(), ""); err != nil || !rep.OK() || len(rep.Checks) != 1 {
				t.Errorf("the other model after removal: %+v, %v", rep, err)
			}
		})
	}
}

func TestPruneRemovesCorruptManifestsKeepsNewerOnes(t *testing.T) {
	s := newTestStore(t)
	importTiny(t, s, "org/good", tinyGGUF(t))
	bad, _ := importTiny(t, s, "org/bad", ggufSeed(t, 3))
	newer, _ := importTiny(t, s, "org/newer", ggufSeed(t, 4))
	badPath := s.manifestPath(ID{Name: "org/bad", Tag: DefaultTag})
	valid, _ := os.ReadFile(badPath)
	writeFile(t, badPath, valid[:40])
	newerPath := s.manifestPath(ID{Name: "org/newer", Tag: DefaultTag})
	nv, _ := os.ReadFile(newerPath)
	writeFile(t, newerPath, []byte(strings.Replace(string(nv), `"schema_version": 1`, `"schema_version": 99`, 1)))

	if rep, err := s.Verify(context.Background(), ""); err != nil || rep.OK() {
		t.Errorf("Verify does not report the unreadable manifests: %+v, %v", rep, err)
	}
	rep, err := s.Prune(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.CorruptManifests) != 1 || rep.CorruptManifests[0] != "org/bad" {
		t.Errorf("CorruptManifests %v", rep.CorruptManifests)
	}
	if _, err := os.Stat(badPath); !os.IsNotExist(err) {
		t.Errorf("corrupt manifest kept: %v", err)
	}
	if _, err := os.Stat(s.blobPath(strings.TrimPrefix(bad.Files[0].Digest, DigestPrefix))); !os.IsNotExist(err) {
		t.Errorf("corrupt manifest's blob kept: %v", err)
	}
	if _, err := os.Stat(newerPath); err != nil {
		t.Errorf("a newer modeld's manifest was removed: %v", err)
	}
	if _, err := os.Stat(s.blobPath(strings.TrimPrefix(newer.Files[0].Digest, DigestPrefix))); err != nil {
		t.Errorf("a newer modeld's blob was removed: %v", err)
	}
	if _, err := s.Remove(context.Background(), "org/newer"); err == nil || errors.Is(err, ErrCorruptManifest) {
		t.Errorf("Remove of a newer modeld's model: %v", err)
	}
	// Records of blobs that are gone go too.
	entries, _ := os.ReadDir(filepath.Join(s.Root(), dirVerified))
	if len(entries) != 2 {
		t.Errorf("%d verification records, want 2 (good and newer)", len(entries))
	}
}
