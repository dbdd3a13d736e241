package hub

import (
	"log/slog"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/modeld/modeld/models"
	"github.com/modeld/modeld/models/internal/storetest"
)

// Fixtures shared with the store's tests.
var (
	tinyGGUF     = storetest.TinyGGUF
	ggufSeed     = storetest.GGUFSeed
	sha256Hex    = storetest.SHA256Hex
	writeFile    = storetest.WriteFile
	onnxFiles    = storetest.ONNXFiles
	walkFiles    = storetest.WalkFiles
	contentFiles = storetest.ContentFiles
	flipByte     = storetest.FlipByte
)

const (
	kindEmbed     = storetest.KindEmbed
	kindSummarize = storetest.KindSummarize
)

func newTestStore(t *testing.T) *models.Store {
	t.Helper()
	s, err := models.Open(t.TempDir(), models.Options{Now: func() time.Time { return storetest.Now }, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// storeFiles lists the files of a store (paths and sizes), but for the two
// store-wide lock files.
func storeFiles(t *testing.T, s *models.Store) []string { return storetest.StoreFiles(t, s.Root()) }

// blobPath returns the blob file of hexDigest in s.
func blobPath(t *testing.T, s *models.Store, hexDigest string) string {
	t.Helper()
	p, err := s.BlobPath(models.DigestPrefix + hexDigest)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func blobCount(t *testing.T, s *models.Store) int {
	t.Helper()
	entries, err := os.ReadDir(filepath.Join(s.Root(), "blobs"))
	if err != nil {
		t.Fatal(err)
	}
	return len(entries)
}

func fileExists(p string) bool {
	_, err := os.Stat(p)
	return err == nil
}
