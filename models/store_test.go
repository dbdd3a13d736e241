package models

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

// importONNX imports a test folder under id.
func importONNX(t *testing.T, s *Store, id string, files map[string][]byte) *Manifest {
	t.Helper()
	m, err := s.Import(context.Background(), writeONNXFolder(t, files), ImportOptions{Name: id}, nil)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// Two models sharing tokenizer files: rm of one keeps the shared blobs, rm of
// the other frees them.
func TestRemoveKeepsSharedBlobs(t *testing.T) {
	s := newTestStore(t)
	files := onnxFiles(t, kindClassify)
	a := importONNX(t, s, "test/a", files)
	files["onnx/model.onnx"] = fakeONNX(42, 1500) // b differs only in its graph
	b := importONNX(t, s, "test/b", files)
	if n := blobCount(t, s); n != len(a.Files)+1 {
		t.Fatalf("%d blobs, want %d (shared files stored once)", n, len(a.Files)+1)
	}

	rep, err := s.Remove(context.Background(), "test/a")
	if err != nil {
		t.Fatal(err)
	}
	aGraph, _ := a.File("onnx/model.onnx")
	if rep.Freed != aGraph.Size {
		t.Errorf("freed %d, want %d (only a's graph)", rep.Freed, aGraph.Size)
	}
	if len(rep.Kept) != len(a.Files)-1 {
		t.Errorf("kept %v, want the %d shared files", rep.Kept, len(a.Files)-1)
	}
	for _, f := range b.Files {
		p, _ := s.BlobPath(f.Digest)
		if _, err := os.Stat(p); err != nil {
			t.Errorf("blob of b's %s is gone: %v", f.Path, err)
		}
	}
	if _, err := s.Get("test/a"); !errors.Is(err, ErrNotFound) {
		t.Errorf("Get(a) after rm = %v, want ErrNotFound", err)
	}
	if _, err := s.Remove(context.Background(), "test/a"); !errors.Is(err, ErrNotFound) {
		t.Errorf("second rm = %v, want ErrNotFound", err)
	}

	rep, err = s.Remove(context.Background(), "test/b")
	if err != nil {
		t.Fatal(err)
	}
	if rep.Freed != b.Size() || len(rep.Kept) != 0 {
		t.Errorf("rm b freed %d kept %v, want %d and nothing", rep.Freed, rep.Kept, b.Size())
	}
	if files := contentFiles(t, s.Root()); len(files) != 0 {
		t.Errorf("store still holds %v", files)
	}
	if _, err := os.Stat(filepath.Join(s.Root(), dirManifests, "test")); !os.IsNotExist(err) {
		t.Errorf("empty manifest directory kept: %v", err)
	}
}

// du accounts for every byte under the store root.
func TestDiskUsageTotalIsWhatIsOnDisk(t *testing.T) {
	s := newTestStore(t)
	files := onnxFiles(t, kindEmbed)
	a := importONNX(t, s, "test/a", files)
	files["onnx/model.onnx"] = fakeONNX(43, 5000)
	b := importONNX(t, s, "test/b", files)
	src := filepath.Join(t.TempDir(), "tiny.gguf")
	writeFile(t, src, tinyGGUF(t))
	c, err := s.Import(context.Background(), src, ImportOptions{Name: "test/c:q"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	// Leftovers: an orphan blob, an interrupted download, a crashed manifest write.
	orphan := []byte("orphaned content")
	writeFile(t, s.blobPath(sha256Hex(orphan)), orphan)
	writeFile(t, s.partialPath("sha256-"+strings.Repeat("a", 64)), make([]byte, 777))
	writeFile(t, filepath.Join(s.Root(), dirManifests, "test", tmpPrefix+"@x.json-123"), []byte("{half"))

	u, err := s.DiskUsage()
	if err != nil {
		t.Fatal(err)
	}
	var onDisk int64
	for _, size := range walkFiles(t, s.Root()) {
		onDisk += size
	}
	if u.Total != onDisk {
		t.Errorf("du total %d, bytes on disk %d", u.Total, onDisk)
	}
	if sum := u.Blobs + u.Manifests + Sum(u.Partials) + Sum(u.Orphans) + Sum(u.Other); sum != u.Total {
		t.Errorf("categories sum to %d, total %d", sum, u.Total)
	}
	if len(u.Orphans) != 1 || u.Orphans[0].Size != int64(len(orphan)) {
		t.Errorf("orphans %v", u.Orphans)
	}
	if Sum(u.Partials) != 777 {
		t.Errorf("partials %v", u.Partials)
	}
	byID := map[string]ModelUsage{}
	for _, m := range u.Models {
		byID[m.ID] = m
	}
	aGraph, _ := a.File("onnx/model.onnx")
	bGraph, _ := b.File("onnx/model.onnx")
	sharedAB := a.Size() - aGraph.Size
	if got := byID["test/a"]; got.Unique != aGraph.Size || got.Shared != sharedAB || !reflect.DeepEqual(got.SharedWith, []string{"test/b"}) {
		t.Errorf("usage of a = %+v, want unique %d shared %d with b", got, aGraph.Size, sharedAB)
	}
	if got := byID["test/b"]; got.Unique != bGraph.Size || got.Shared != sharedAB {
		t.Errorf("usage of b = %+v", got)
	}
	if got := byID["test/c:q"]; got.Unique != c.Size() || got.Shared != 0 {
		t.Errorf("usage of c = %+v", got)
	}
	if u.Blobs != aGraph.Size+bGraph.Size+sharedAB+c.Size() {
		t.Errorf("referenced blobs %d", u.Blobs)
	}
}

// A crash during a manifest write leaves the old manifest; the temp file is
// ignored by readers and removed by Prune.
func TestManifestWriteIsCrashSafe(t *testing.T) {
	s := newTestStore(t)
	files := onnxFiles(t, kindClassify)
	old := importONNX(t, s, "test/m", files)
	oldBytes, err := os.ReadFile(s.manifestPath(ID{Name: "test/m", Tag: DefaultTag}))
	if err != nil {
		t.Fatal(err)
	}

	// The write fails between fsync and rename (a crash there).
	crash := errors.New("simulated crash")
	var tmpSeen string
	s.hooks.beforeManifestRename = func(tmp string) error { tmpSeen = tmp; return crash }
	files["onnx/model.onnx"] = fakeONNX(77, 1234)
	_, err = s.Import(context.Background(), writeONNXFolder(t, files), ImportOptions{Name: "test/m", Replace: true}, nil)
	if !errors.Is(err, crash) {
		t.Fatalf("import = %v, want the simulated crash", err)
	}
	s.hooks.beforeManifestRename = nil
	if tmpSeen == "" {
		t.Fatal("the hook never ran")
	}
	if _, err := os.Stat(tmpSeen); !os.IsNotExist(err) {
		t.Errorf("temporary file left after a failed write: %v", err)
	}
	nowBytes, _ := os.ReadFile(s.manifestPath(ID{Name: "test/m", Tag: DefaultTag}))
	if string(nowBytes) != string(oldBytes) {
		t.Error("the old manifest changed")
	}

	// A process killed there leaves its temp file behind.
	leftover := filepath.Join(filepath.Dir(tmpSeen), filepath.Base(tmpSeen))
	writeFile(t, leftover, []byte(`{"schema_version":1,"id":"test/m","half":`))
	ms, err := s.List()
	if err != nil || len(ms) != 1 || !reflect.DeepEqual(ms[0], old) {
		t.Fatalf("List = %v, %v; want only the old manifest", ms, err)
	}
	rep, err := s.Prune(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(leftover); !os.IsNotExist(err) {
		t.Errorf("prune kept the temp file: %v", err)
	}
	// The new graph's blob was committed before the crash: an orphan now.
	if rep.Freed != int64(len(files["onnx/model.onnx"]))+int64(len(`{"schema_version":1,"id":"test/m","half":`)) {
		t.Errorf("prune freed %d (%v)", rep.Freed, rep.Removed)
	}
	if m, err := s.Get("test/m"); err != nil || !reflect.DeepEqual(m, old) {
		t.Errorf("after prune Get = %v, %v", m, err)
	}
}

func TestPrune(t *testing.T) {
	s := newTestStore(t)
	importONNX(t, s, "test/a", onnxFiles(t, kindRerank))
	orphan := []byte("nobody uses me")
	writeFile(t, s.blobPath(sha256Hex(orphan)), orphan)
	writeFile(t, filepath.Join(s.Root(), dirBlobs, "stray"), []byte("xy"))
	stale := "sha256-" + strings.Repeat("b", 64)
	writeFile(t, s.partialPath(stale), make([]byte, 100))
	writeFile(t, s.sidecarPath(stale), []byte(`{"size":1000}`))
	busy := "sha256-" + strings.Repeat("c", 64)
	writeFile(t, s.partialPath(busy), make([]byte, 50))
	unlock, err := s.lockPartial(context.Background(), busy, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer unlock()

	// While a pull or import runs, orphans are kept (they may be its blobs).
	end, err := s.beginActive(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	rep, err := s.Prune(context.Background())
	end()
	if err != nil {
		t.Fatal(err)
	}
	if !rep.OrphansKept || rep.PartialsInUse != 1 {
		t.Errorf("report %+v: want orphans kept and one partial in use", rep)
	}
	if _, err := os.Stat(s.blobPath(sha256Hex(orphan))); err != nil {
		t.Errorf("orphan removed during an active pull: %v", err)
	}
	if _, err := os.Stat(s.partialPath(stale)); !os.IsNotExist(err) {
		t.Error("stale partial kept")
	}
	wantFirst := int64(2 + 100 + len(`{"size":1000}`))
	if rep.Freed != wantFirst {
		t.Errorf("freed %d, want %d (%v)", rep.Freed, wantFirst, rep.Removed)
	}

	rep, err = s.Prune(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if rep.OrphansKept || rep.Freed != int64(len(orphan)) {
		t.Errorf("second prune %+v, want the orphan (%d bytes) freed", rep, len(orphan))
	}
	if _, err := os.Stat(s.partialPath(busy)); err != nil {
		t.Errorf("a partial in use was removed: %v", err)
	}
	if ms, _ := s.List(); len(ms) != 1 {
		t.Errorf("prune touched a model: %v", ms)
	}
	m, _ := s.Get("test/a")
	for _, f := range m.Files {
		if p, _ := s.BlobPath(f.Digest); !fileExists(p) {
			t.Errorf("prune removed blob of %s", f.Path)
		}
	}
}

func fileExists(p string) bool {
	_, err := os.Stat(p)
	return err == nil
}

func TestListSkipsBrokenManifests(t *testing.T) {
	s := newTestStore(t)
	importONNX(t, s, "test/a", onnxFiles(t, kindEmbed))
	writeFile(t, filepath.Join(s.Root(), dirManifests, "test", "b", "@latest.json"), []byte("{not json"))
	writeFile(t, filepath.Join(s.Root(), dirManifests, "test", "c", "@latest.json"), []byte(`{"schema_version":99,"id":"test/c"}`))
	ms, err := s.List()
	if err != nil || len(ms) != 1 || ms[0].ID != "test/a" {
		t.Fatalf("List = %v, %v", ms, err)
	}
	if _, err := s.Get("test/c"); err == nil || !strings.Contains(err.Error(), "schema version 99") {
		t.Errorf("Get of a newer manifest = %v", err)
	}
}
