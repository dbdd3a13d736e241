package promptcache

import (
	"crypto/sha256"
	"hash/crc32"
	"io"
	"os"
	"path/filepath"
	"testing"
)

// benchEntryBytes is the state of the prompt-cache benchmark's agent turn:
// 12,113 tokens of F16 K and V on gen-gguf's bench preset (6 layers, 512
// wide), about 12 KiB a token.
const benchEntryBytes = 149_063_443

// BenchmarkLoad is a restore's read and verification of one entry of that
// size from the page cache (Cache.Load), against its parts: the file read
// alone, its CRC-32C (the checksum of format version 2) and the SHA-256 of
// version 1.
func BenchmarkLoad(b *testing.B) {
	e := &env{dir: filepath.Join(b.TempDir(), "kvcache"), log: &logBuf{}, free: 1 << 40}
	c, err := Open(Options{Dir: e.dir, Margin: 1 << 20, FreeSpace: func(string) (int64, error) { return e.free, nil }}, keyA)
	if err != nil {
		b.Fatal(err)
	}
	prefix := toks(12113, 1)
	st := state(benchEntryBytes, 0x5a)
	if err := c.Save(prefix, st); err != nil {
		b.Fatal(err)
	}
	name, _ := c.Lookup(prefix)
	path := filepath.Join(e.dir, name)
	b.Run("Load", func(b *testing.B) {
		b.SetBytes(benchEntryBytes)
		for b.Loop() {
			if _, _, err := c.Load(name); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("read", func(b *testing.B) {
		b.SetBytes(benchEntryBytes)
		for b.Loop() {
			f, err := os.Open(path)
			if err != nil {
				b.Fatal(err)
			}
			buf := make([]byte, benchEntryBytes)
			if _, err := io.ReadFull(f, buf); err != nil {
				b.Fatal(err)
			}
			_ = f.Close()
		}
	})
	b.Run("crc32c", func(b *testing.B) {
		b.SetBytes(benchEntryBytes)
		for b.Loop() {
			_ = crc32.Checksum(st, castagnoli)
		}
	})
	b.Run("sha256", func(b *testing.B) {
		b.SetBytes(benchEntryBytes)
		for b.Loop() {
			_ = sha256.Sum256(st)
		}
	})
}
