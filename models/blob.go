package models

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"hash"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
)

const (
	// DigestPrefix starts every digest a manifest records ("sha256:<hex>").
	DigestPrefix   = "sha256:"
	blobNamePrefix = "sha256-"
)

// parseDigest checks "sha256:<64 lowercase hex>" and returns the hex part.
func parseDigest(d string) (string, error) {
	h, ok := strings.CutPrefix(d, DigestPrefix)
	if !ok || !IsSHA256Hex(h) {
		return "", fmt.Errorf("digest %q is not sha256:<64 lowercase hex digits>", shownID(d))
	}
	return h, nil
}

// IsSHA256Hex reports whether h is 64 lowercase hex digits, the form of a
// blob name.
func IsSHA256Hex(h string) bool {
	if len(h) != 64 {
		return false
	}
	for i := 0; i < len(h); i++ {
		c := h[i]
		if !((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f')) {
			return false
		}
	}
	return true
}

// BlobPath returns the file holding the blob with the given digest
// ("sha256:<hex>"). It does not check that the file exists.
func (s *Store) BlobPath(digest string) (string, error) {
	h, err := parseDigest(digest)
	if err != nil {
		return "", err
	}
	return s.blobPath(h), nil
}

func (s *Store) blobPath(hexDigest string) string {
	return filepath.Join(s.root, dirBlobs, blobNamePrefix+hexDigest)
}

// FilePath returns the local path of the file at path inside model m, for
// loaders: the blob that holds it. ErrNotFound when m has no such file.
func (s *Store) FilePath(m *Manifest, path string) (string, error) {
	f, ok := m.File(path)
	if !ok {
		return "", fmt.Errorf("%w: %s has no file %q", ErrNotFound, m.ID, path)
	}
	return s.BlobPath(f.Digest)
}

// hasBlob reports whether the blob exists with the given size.
func (s *Store) hasBlob(hexDigest string, size int64) bool {
	fi, err := os.Stat(s.blobPath(hexDigest))
	return err == nil && fi.Mode().IsRegular() && (size < 0 || fi.Size() == size)
}

// commitBlob makes the verified file at src the blob hexDigest: fsync, make it
// read-only, rename into blobs/, fsync blobs/, record it as verified. When
// the blob already exists and is unchanged since it was verified, src is
// removed instead; an existing blob not known to be good is replaced.
func (s *Store) commitBlob(src, hexDigest string) error {
	dst := s.blobPath(hexDigest)
	if s.stampTrusted(hexDigest) {
		if err := os.Remove(src); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("remove duplicate of blob %s: %w", hexDigest, err)
		}
		return nil
	}
	f, err := os.OpenFile(src, os.O_RDWR, 0)
	if err != nil {
		return fmt.Errorf("open verified file: %w", err)
	}
	serr := f.Sync()
	cerr := f.Close()
	if err := errors.Join(serr, cerr); err != nil {
		return fmt.Errorf("sync verified file: %w", err)
	}
	if err := os.Chmod(src, 0o444); err != nil {
		return fmt.Errorf("make blob read-only: %w", err)
	}
	if err := os.Rename(src, dst); err != nil {
		return fmt.Errorf("move verified file into blobs: %w", err)
	}
	if err := syncDir(filepath.Dir(dst)); err != nil {
		return err
	}
	if fi, err := os.Stat(dst); err == nil {
		s.recordStamp(hexDigest, fi, true, "")
	}
	return nil
}

// goodBlob reports whether blob hexDigest exists with size bytes (-1: any)
// and its bytes match: unchanged since verified, or hashed now. A pull finds
// a corrupt blob not present, fetches it again and replaces it.
func (s *Store) goodBlob(ctx context.Context, hexDigest string, size int64) bool {
	if !s.hasBlob(hexDigest, size) {
		return false
	}
	if s.stampTrusted(hexDigest) {
		return true
	}
	r := s.hashBlob(ctx, hexDigest, size)
	if r.status == CheckCorrupt && r.err == nil {
		s.log.Warn("models: blob does not match its digest; fetching it again", "digest", DigestPrefix+hexDigest, "got", r.got)
	}
	return r.status == CheckOK
}

// hashingWriter hashes everything written through it.
type hashingWriter struct {
	w io.Writer
	h hash.Hash
	n int64
}

func newHashingWriter(w io.Writer) *hashingWriter {
	return &hashingWriter{w: w, h: sha256.New()}
}

func (hw *hashingWriter) Write(p []byte) (int, error) {
	n, err := hw.w.Write(p)
	hw.h.Write(p[:n])
	hw.n += int64(n)
	return n, err
}

func (hw *hashingWriter) sum() string { return hex.EncodeToString(hw.h.Sum(nil)) }

// CopyContext copies src to dst in 1 MiB steps, stopping when ctx is done,
// and calls onWrite after each step with the bytes written so far. Import,
// hashing and the hub's downloads share it.
func CopyContext(ctx context.Context, dst io.Writer, src io.Reader, onWrite func(n int64)) (int64, error) {
	buf := make([]byte, 1<<20)
	var total int64
	for {
		if err := ctx.Err(); err != nil {
			return total, err
		}
		n, rerr := src.Read(buf)
		if n > 0 {
			w, werr := dst.Write(buf[:n])
			total += int64(w)
			if onWrite != nil {
				onWrite(total)
			}
			if werr != nil {
				return total, werr
			}
		}
		if rerr == io.EOF {
			return total, nil
		}
		if rerr != nil {
			return total, rerr
		}
	}
}

// hashFile returns the sha256 (hex) and size of the file at path.
func hashFile(ctx context.Context, path string) (string, int64, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", 0, fmt.Errorf("open %s: %w", path, err)
	}
	defer f.Close() //nolint:errcheck // read-only
	hw := newHashingWriter(io.Discard)
	if _, err := CopyContext(ctx, hw, f, nil); err != nil {
		return "", 0, fmt.Errorf("hash %s: %w", path, err)
	}
	return hw.sum(), hw.n, nil
}
