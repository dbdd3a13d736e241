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
)

// Verification records. A blob's sha256 is checked when it enters the store,
// but its file can change later (a disk error, an editor, a stray write). The
// store keeps, per blob, what the file looked like when its bytes were last
// hashed: ROOT/verified/sha256-<hex>.json with size, mtime, change time and
// inode, and whether the bytes matched. Before a load (VerifyForLoad) a blob
// whose file no longer looks like that is hashed again, and a blob known not
// to match is refused; Verify hashes everything again on demand.

// dirVerified holds one verification record per blob.
const dirVerified = "verified"

// cheapHash is the blob size up to which VerifyForLoad hashes a blob on every
// load even when its file did not change: the load reads it anyway.
const cheapHash = 64 << 20

// blobStamp is what the store knew of a blob file when it last hashed it.
type blobStamp struct {
	Size     int64     `json:"size"`
	MTimeNS  int64     `json:"mtime_ns"`
	CTimeNS  int64     `json:"ctime_ns,omitempty"`
	Inode    uint64    `json:"inode,omitempty"`
	OK       bool      `json:"ok"`            // the bytes hashed to the blob's digest
	Got      string    `json:"got,omitempty"` // when not OK: the digest the bytes have
	Verified time.Time `json:"verified"`
}

// stampOf describes fi; OK, Got and Verified are the caller's.
func stampOf(fi fs.FileInfo) blobStamp {
	ct, ino := fileIdentity(fi)
	return blobStamp{Size: fi.Size(), MTimeNS: fi.ModTime().UnixNano(), CTimeNS: ct, Inode: ino}
}

// sameFile reports whether two stamps describe the same, unchanged file.
func (a blobStamp) sameFile(b blobStamp) bool {
	return a.Size == b.Size && a.MTimeNS == b.MTimeNS && a.CTimeNS == b.CTimeNS && a.Inode == b.Inode
}

func (s *Store) stampPath(hexDigest string) string {
	return filepath.Join(s.root, dirVerified, blobNamePrefix+hexDigest+".json")
}

// readStamp returns the record of a blob, nil when absent or unreadable.
func (s *Store) readStamp(hexDigest string) *blobStamp {
	data, err := os.ReadFile(s.stampPath(hexDigest))
	if err != nil {
		return nil
	}
	var st blobStamp
	if json.Unmarshal(data, &st) != nil {
		return nil
	}
	return &st
}

// recordStamp writes the record of blob hexDigest after its file fi was
// hashed; a failure is logged (the next load hashes again).
func (s *Store) recordStamp(hexDigest string, fi fs.FileInfo, ok bool, got string) {
	st := stampOf(fi)
	st.OK, st.Verified = ok, s.now().UTC()
	if !ok {
		st.Got = got
	}
	data, err := json.Marshal(st)
	if err == nil {
		err = os.MkdirAll(filepath.Join(s.root, dirVerified), 0o755)
	}
	if err == nil {
		path := s.stampPath(hexDigest)
		tmp := filepath.Join(filepath.Dir(path), tmpPrefix+filepath.Base(path)+"-"+randomSuffix())
		if err = os.WriteFile(tmp, data, 0o644); err == nil {
			if err = os.Rename(tmp, path); err != nil {
				_ = os.Remove(tmp)
			}
		}
	}
	if err != nil {
		s.log.Warn("models: record blob verification", "digest", DigestPrefix+hexDigest, "err", err)
	}
}

// removeStamp removes the record of a removed blob.
func (s *Store) removeStamp(hexDigest string) {
	if err := os.Remove(s.stampPath(hexDigest)); err != nil && !errors.Is(err, fs.ErrNotExist) {
		s.log.Warn("models: remove blob verification record", "digest", DigestPrefix+hexDigest, "err", err)
	}
}

// stampTrusted reports whether blob hexDigest's file is unchanged since it
// was hashed and found good.
func (s *Store) stampTrusted(hexDigest string) bool {
	fi, err := os.Stat(s.blobPath(hexDigest))
	if err != nil || !fi.Mode().IsRegular() {
		return false
	}
	st := s.readStamp(hexDigest)
	return st != nil && st.OK && st.sameFile(stampOf(fi))
}

// Blob check statuses.
const (
	CheckOK       = "ok"
	CheckCorrupt  = "corrupt"          // the bytes do not hash to the digest, or the size differs
	CheckMissing  = "missing"          // no blob file
	CheckManifest = "corrupt manifest" // the model's manifest cannot be read
)

// BlobCheck is the result of checking one file of a model.
type BlobCheck struct {
	Model   string `json:"model"`
	Path    string `json:"path,omitempty"`   // the file inside the model
	Digest  string `json:"digest,omitempty"` // what the manifest says
	Size    int64  `json:"size,omitempty"`   // what the manifest says
	Status  string `json:"status"`
	Got     string `json:"got,omitempty"`      // corrupt: the digest of the bytes on disk
	GotSize int64  `json:"got_size,omitempty"` // corrupt: the size on disk
	Error   string `json:"error,omitempty"`
}

// VerifyReport is what Verify found.
type VerifyReport struct {
	Checks []BlobCheck `json:"checks"`
	Bytes  int64       `json:"bytes_hashed"`
}

// OK reports whether every check passed.
func (r *VerifyReport) OK() bool {
	for _, c := range r.Checks {
		if c.Status != CheckOK {
			return false
		}
	}
	return true
}

// blobResult is the outcome of hashing one blob.
type blobResult struct {
	status  string
	got     string
	gotSize int64
	err     error
}

// hashBlob hashes blob hexDigest, expecting size bytes, and records the result.
func (s *Store) hashBlob(ctx context.Context, hexDigest string, size int64) blobResult {
	path := s.blobPath(hexDigest)
	fi, err := os.Stat(path)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return blobResult{status: CheckMissing}
	case err != nil:
		return blobResult{status: CheckCorrupt, err: err}
	case !fi.Mode().IsRegular():
		return blobResult{status: CheckCorrupt, err: fmt.Errorf("%s is not a regular file", path)}
	}
	got, n, err := hashFile(ctx, path)
	if err != nil {
		return blobResult{status: CheckCorrupt, err: err}
	}
	if s.hooks.blobHashed != nil {
		s.hooks.blobHashed(hexDigest)
	}
	ok := got == hexDigest && (size < 0 || n == size)
	// The record describes the file as it was before hashing: a write while
	// hashing changes it, and the next check hashes again.
	s.recordStamp(hexDigest, fi, ok, DigestPrefix+got)
	if !ok {
		return blobResult{status: CheckCorrupt, got: DigestPrefix + got, gotSize: n}
	}
	return blobResult{status: CheckOK}
}

// Verify hashes again every blob of model id, or of every model when id is
// "", and reports each file as ok, corrupt (with the digest its bytes have)
// or missing; a manifest that cannot be read is reported too. A blob shared
// by several models is hashed once. The result is recorded, so that a load
// refuses a corrupt blob without hashing it again.
func (s *Store) Verify(ctx context.Context, id string) (*VerifyReport, error) {
	var ms []*Manifest
	rep := &VerifyReport{}
	if id != "" {
		pid, err := ParseID(id)
		if err != nil {
			return nil, err
		}
		m, err := s.get(pid)
		if errors.Is(err, ErrCorruptManifest) {
			rep.Checks = append(rep.Checks, BlobCheck{Model: pid.String(), Status: CheckManifest, Error: err.Error()})
			return rep, nil
		}
		if err != nil {
			return nil, err
		}
		ms = []*Manifest{m}
	} else {
		all, bad, err := s.scanAll()
		if err != nil {
			return nil, err
		}
		ms = all
		for _, b := range bad {
			rep.Checks = append(rep.Checks, BlobCheck{Model: b.id, Status: CheckManifest, Error: b.err.Error()})
		}
	}
	done := map[string]blobResult{}
	for _, m := range ms {
		for _, f := range m.Files {
			if err := ctx.Err(); err != nil {
				return rep, err
			}
			c := BlobCheck{Model: m.ID, Path: f.Path, Digest: f.Digest, Size: f.Size}
			h, err := parseDigest(f.Digest)
			if err != nil { // validate refuses these: never here
				c.Status, c.Error = CheckCorrupt, err.Error()
				rep.Checks = append(rep.Checks, c)
				continue
			}
			r, seen := done[h]
			if !seen {
				r = s.hashBlob(ctx, h, f.Size)
				if errors.Is(r.err, context.Canceled) || errors.Is(r.err, context.DeadlineExceeded) {
					return rep, r.err
				}
				done[h] = r
				if r.status != CheckMissing {
					rep.Bytes += max(r.gotSize, f.Size)
				}
			}
			c.Status, c.Got, c.GotSize = r.status, r.got, r.gotSize
			if r.err != nil {
				c.Error = r.err.Error()
			}
			rep.Checks = append(rep.Checks, c)
		}
	}
	return rep, nil
}

// VerifyForLoad checks, before a loader opens them, that m's blobs are the
// bytes their digests name: a blob whose file changed since it was last
// hashed (size, mtime, change time or inode differ), that has no record, or
// that is small enough to hash cheaply is hashed now; a blob known not to
// match is refused at once. The error wraps ErrCorruptBlob and says what to do.
func (s *Store) VerifyForLoad(ctx context.Context, m *Manifest) error {
	for _, f := range m.Files {
		h, err := parseDigest(f.Digest)
		if err != nil {
			return fmt.Errorf("%w: %s of %s: %w", ErrCorruptBlob, f.Path, m.ID, err)
		}
		fi, err := os.Stat(s.blobPath(h))
		if err != nil {
			return fmt.Errorf("%w: %s of %s: blob %s: %w (pull or import the model again)", ErrCorruptBlob, f.Path, m.ID, f.Digest, err)
		}
		if fi.Size() != f.Size {
			return corruptBlobError(m, f, fmt.Sprintf("it is %d bytes, the manifest says %d", fi.Size(), f.Size))
		}
		st := s.readStamp(h)
		if st != nil && st.sameFile(stampOf(fi)) {
			if !st.OK {
				return corruptBlobError(m, f, "its bytes hash to "+st.Got)
			}
			limit := int64(cheapHash)
			if s.hooks.cheapHash != 0 {
				limit = s.hooks.cheapHash
			}
			if f.Size > limit {
				continue
			}
		}
		r := s.hashBlob(ctx, h, f.Size)
		switch {
		case r.err != nil:
			return fmt.Errorf("verify %s of %s: %w", f.Path, m.ID, r.err)
		case r.status == CheckMissing:
			return fmt.Errorf("%w: %s of %s: blob %s is missing (pull or import the model again)", ErrCorruptBlob, f.Path, m.ID, f.Digest)
		case r.status != CheckOK:
			s.log.Error("models: blob does not match its digest", "model", m.ID, "file", f.Path, "digest", f.Digest, "got", r.got)
			return corruptBlobError(m, f, "its bytes hash to "+r.got)
		}
	}
	return nil
}

func corruptBlobError(m *Manifest, f File, why string) error {
	return fmt.Errorf("%w: %s of %s (blob %s): %s; run `modeld verify %s`, then pull or import the model again",
		ErrCorruptBlob, f.Path, m.ID, f.Digest, why, m.ID)
}

// pruneStamps removes the records of blobs that are gone and temporary
// files; remove is Prune's.
func (s *Store) pruneStamps(remove func(string)) {
	dir := filepath.Join(s.root, dirVerified)
	entries, err := os.ReadDir(dir)
	if err != nil {
		return // none yet
	}
	for _, e := range entries {
		name := e.Name()
		h, ok := strings.CutPrefix(strings.TrimSuffix(name, ".json"), blobNamePrefix)
		if !ok || !strings.HasSuffix(name, ".json") || !IsSHA256Hex(h) {
			remove(filepath.Join(dir, name))
			continue
		}
		if _, err := os.Stat(s.blobPath(h)); errors.Is(err, fs.ErrNotExist) {
			remove(filepath.Join(dir, name))
		}
	}
}
