package models

import (
	"log/slog"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/modeld/modeld/models/internal/storetest"
)

// The fixtures shared with the tests of models/hub live in storetest; these
// are the short names this package's tests use.
var (
	testNow       = storetest.Now
	tinyGGUF      = storetest.TinyGGUF
	ggufSeed      = storetest.GGUFSeed
	fakeONNX      = storetest.FakeONNX
	sha256Hex     = storetest.SHA256Hex
	writeFile     = storetest.WriteFile
	writeTemp     = storetest.WriteTemp
	mustJSON      = storetest.MustJSON
	onnxFiles     = storetest.ONNXFiles
	walkFiles     = storetest.WalkFiles
	contentFiles  = storetest.ContentFiles
	flipByte      = storetest.FlipByte
	kindEmbed     = storetest.KindEmbed
	kindClassify  = storetest.KindClassify
	kindNLI       = storetest.KindNLI
	kindRerank    = storetest.KindRerank
	kindSummarize = storetest.KindSummarize
)

// onnxKind names a test ONNX model shape.
type onnxKind = storetest.ONNXKind

func newTestStore(t *testing.T) *Store {
	t.Helper()
	s, err := Open(t.TempDir(), Options{Now: func() time.Time { return testNow }, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// writeONNXFolder writes files under a new directory and returns it.
func writeONNXFolder(t *testing.T, files map[string][]byte) string {
	t.Helper()
	dir := t.TempDir()
	for p, b := range files {
		writeFile(t, filepath.Join(dir, filepath.FromSlash(p)), b)
	}
	return dir
}

// storeFiles lists the files of a store (paths and sizes), but for the two
// store-wide lock files.
func storeFiles(t *testing.T, s *Store) []string { return storetest.StoreFiles(t, s.Root()) }

func blobCount(t *testing.T, s *Store) int {
	t.Helper()
	entries, err := os.ReadDir(filepath.Join(s.Root(), dirBlobs))
	if err != nil {
		t.Fatal(err)
	}
	return len(entries)
}
