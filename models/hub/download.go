package hub

import (
	"github.com/modeld/modeld/models"

	"context"
	"crypto/sha1" //nolint:gosec // git blob ids are sha1; used to verify, not to secure
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"hash"
	"io"
	"net/http"
	"os"
	"strconv"
	"strings"
	"syscall"
)

// remoteFile is one file a pull fetches.
type remoteFile struct {
	Path    string // path inside the model
	URL     string // hub resolve URL or plain URL
	Size    int64  // expected size, -1 unknown
	SHA256  string // expected sha256 (hex), "" unknown
	GitSHA1 string // hub file not in LFS: its git blob id
}

// partialName names the partial file of rf so that every run (and every
// process) fetching the same content uses the same one.
func (rf remoteFile) partialName() string {
	switch {
	case rf.SHA256 != "":
		return "sha256-" + rf.SHA256
	case rf.GitSHA1 != "":
		return "git-" + rf.GitSHA1
	}
	sum := sha256.Sum256([]byte(rf.URL))
	return "url-" + hex.EncodeToString(sum[:16])
}

// verifier hashes a file's bytes in order: sha256, and the git blob id when
// the expected one is known.
type verifier struct {
	sha hash.Hash
	git hash.Hash
	n   int64
}

func newVerifier(gitSize int64) *verifier {
	v := &verifier{sha: sha256.New()}
	if gitSize >= 0 {
		v.git = sha1.New() //nolint:gosec // see import
		fmt.Fprintf(v.git, "blob %d\x00", gitSize)
	}
	return v
}

func (v *verifier) Write(p []byte) (int, error) {
	v.sha.Write(p)
	if v.git != nil {
		v.git.Write(p)
	}
	v.n += int64(len(p))
	return len(p), nil
}

// check compares the hashes with rf's and returns the sha256 (hex).
func (v *verifier) check(rf remoteFile, size int64) (string, error) {
	got := hex.EncodeToString(v.sha.Sum(nil))
	switch {
	case size >= 0 && v.n != size:
		return "", fmt.Errorf("%w: %s: got %d bytes, expected %d", models.ErrChecksum, rf.Path, v.n, size)
	case rf.SHA256 != "" && got != rf.SHA256:
		return "", fmt.Errorf("%w: %s: sha256 %s, expected %s", models.ErrChecksum, rf.Path, got, rf.SHA256)
	case rf.GitSHA1 != "" && v.git != nil && hex.EncodeToString(v.git.Sum(nil)) != rf.GitSHA1:
		return "", fmt.Errorf("%w: %s: git blob id %x, expected %s", models.ErrChecksum, rf.Path, v.git.Sum(nil), rf.GitSHA1)
	}
	return got, nil
}

// fetch makes sure the blob of rf is in the store, downloading it when
// needed, and returns its sha256 (hex) and size. The blob is added to pins.
// A blob already present is never downloaded again; a partial left by an
// earlier run is continued; a sha256 mismatch discards the partial and
// downloads again, up to ChecksumRetries times.
//
// check, when not nil, validates the file's content (a GGUF header) before
// it becomes a blob, or the blob already present: a file it refuses is
// removed with its sidecar and lock, so a refused pull leaves the store as
// it was.
func (p *Puller) fetch(ctx context.Context, rf remoteFile, em *models.Emitter, pins *pinSet, check func(file string) error) (string, int64, error) {
	s := p.store
	if check == nil {
		check = func(string) error { return nil }
	}
	present := func() bool {
		if rf.SHA256 == "" && rf.GitSHA1 != "" {
			rf.SHA256 = s.FindGitOID(rf.GitSHA1, rf.Size)
		}
		if rf.SHA256 == "" || !s.GoodBlob(ctx, rf.SHA256, rf.Size) {
			return false
		}
		pins.add(s.Pin(rf.SHA256))
		em.Emit(models.Progress{Status: models.StatusExists, Digest: models.DigestPrefix + rf.SHA256, File: rf.Path, Total: rf.Size, Completed: rf.Size})
		return true
	}
	if present() {
		return rf.SHA256, rf.Size, p.checkBlob(rf.SHA256, check)
	}
	name := rf.partialName()
	var onWait func()
	if hook := p.partialWait; hook != nil {
		onWait = func() { hook(name) }
	}
	unlock, err := s.LockPartial(ctx, name, onWait)
	if err != nil {
		return "", 0, err
	}
	defer unlock()
	if present() { // another process finished it while we waited
		return rf.SHA256, rf.Size, p.checkBlob(rf.SHA256, check)
	}
	for attempt := 0; ; attempt++ {
		h, n, err := p.fetchOnce(ctx, rf, name, em)
		if err == nil {
			if err := check(s.PartialPath(name)); err != nil {
				// Refused content is not worth continuing: it goes, and
				// never becomes a blob.
				return "", 0, errors.Join(err, s.DropPartial(name))
			}
			pins.add(s.Pin(h))
			if err := s.CommitPartial(name, h); err != nil {
				return "", 0, err
			}
			return h, n, nil
		}
		if errors.Is(err, models.ErrTooLarge) {
			// Over the bound: nothing worth continuing, and it must not
			// stay on the disk.
			return "", 0, errors.Join(err, s.DiscardPartial(name))
		}
		if !errors.Is(err, models.ErrChecksum) {
			return "", 0, err
		}
		// Bad bytes are never kept: a whole-file hash cannot say which range
		// is wrong, so the partial goes.
		if derr := s.DiscardPartial(name); derr != nil {
			return "", 0, errors.Join(err, derr)
		}
		if attempt >= p.cfg.ChecksumRetries {
			return "", 0, err
		}
		s.Logger().Warn("models: checksum mismatch, downloading again", "file", rf.Path, "err", err)
		em.Emit(models.Progress{Status: "sha256 mismatch, downloading " + rf.Path + " again", File: rf.Path})
	}
}

// checkBlob runs check on blob hexDigest.
func (p *Puller) checkBlob(hexDigest string, check func(file string) error) error {
	file, err := p.store.BlobPath(models.DigestPrefix + hexDigest)
	if err != nil {
		return err
	}
	return check(file)
}

// fetchOnce downloads (or continues) the partial of rf and verifies it.
func (p *Puller) fetchOnce(ctx context.Context, rf remoteFile, name string, em *models.Emitter) (string, int64, error) {
	b := backoff{cfg: &p.cfg}
	var meta fileMeta
	for {
		var err error
		if meta, err = p.hub.head(ctx, rf.URL); err == nil {
			break
		}
		if werr := b.wait(ctx, err, false); werr != nil {
			return "", 0, fmt.Errorf("%s: %w", rf.Path, werr)
		}
	}
	if rf.SHA256 == "" && meta.linked && models.IsSHA256Hex(meta.etag) {
		rf.SHA256 = meta.etag // a hub resolve URL pulled as a plain URL
	}
	if rf.SHA256 != "" && meta.linked && models.IsSHA256Hex(meta.etag) && meta.etag != rf.SHA256 {
		return "", 0, fmt.Errorf("%s: the listing says sha256 %s but the file is %s", rf.Path, rf.SHA256, meta.etag)
	}
	size := rf.Size
	if size < 0 {
		size = meta.size
	} else if meta.size >= 0 && meta.size != size {
		return "", 0, fmt.Errorf("%s: the listing says %d bytes but the server %d", rf.Path, size, meta.size)
	}
	if err := p.checkRoom(rf.Path, size, name); err != nil {
		return "", 0, err
	}
	// The sidecar is on disk: it names the URL without credentials or query.
	sc := &models.Sidecar{Source: models.RedactURL(rf.URL), Size: size, ETag: meta.etag}
	if rf.SHA256 != "" {
		sc.Digest = models.DigestPrefix + rf.SHA256
	}
	prog := models.Progress{Status: models.StatusPulling + " " + rf.Path, Digest: sc.Digest, File: rf.Path, Total: size}
	gitSize := int64(-1)
	if rf.GitSHA1 != "" {
		gitSize = size
	}
	if size >= p.cfg.ParallelThreshold && p.cfg.Parallel > 1 {
		err := p.downloadRanges(ctx, meta.location, name, sc, em, prog)
		if err == nil {
			em.Emit(models.Progress{Status: models.StatusVerifying, Digest: sc.Digest, File: rf.Path, Total: size})
			v := newVerifier(gitSize)
			if err := hashInto(ctx, p.store.PartialPath(name), v); err != nil {
				return "", 0, err
			}
			h, err := v.check(rf, size)
			return h, v.n, err
		}
		if !errors.Is(err, errRangeIgnored) {
			return "", 0, err
		}
		p.store.Logger().Info("models: server ignores Range, downloading in one stream", "file", rf.Path)
		if err := p.store.DiscardPartial(name); err != nil {
			return "", 0, err
		}
	}
	v := newVerifier(gitSize)
	if err := p.downloadStream(ctx, meta.location, name, sc, v, em, prog); err != nil {
		return "", 0, err
	}
	h, err := v.check(rf, size)
	return h, v.n, err
}

// checkRoom refuses, before any byte is fetched, a file of size bytes (-1:
// unknown) larger than MaxDownload, or one that would leave less than
// DiskMargin free on the store's file system (counting what the partial
// already holds).
func (p *Puller) checkRoom(file string, size int64, name string) error {
	if size < 0 {
		return nil // bounded while streaming (streamLimit)
	}
	if p.cfg.MaxDownload > 0 && size > p.cfg.MaxDownload {
		return fmt.Errorf("%w: %s is %d bytes, more than %d", models.ErrTooLarge, file, size, p.cfg.MaxDownload)
	}
	free, err := p.cfg.freeSpace(p.store.Root())
	if err != nil || free < 0 {
		p.store.Logger().Warn("models: free disk space unknown; the download is bounded by ENOSPC only", "err", err)
		return nil
	}
	need := size - min(p.partialHas(name), size)
	if need+p.cfg.DiskMargin > free {
		return fmt.Errorf("%w: %s needs %d more bytes, %d are free in %s and %d must stay free", models.ErrNoSpace, file, need, free, p.store.Root(), p.cfg.DiskMargin)
	}
	return nil
}

// partialHas estimates the bytes of the partial of name already on disk: the
// finished parts of a ranged download (its file is sparse), else its length.
func (p *Puller) partialHas(name string) int64 {
	if sc := p.store.ReadSidecar(name); sc != nil && len(sc.Chunks) > 0 {
		var n int64
		for _, c := range sc.Chunks {
			n += c.Done
		}
		return n
	}
	fi, err := os.Stat(p.store.PartialPath(name))
	if err != nil {
		return 0
	}
	return fi.Size()
}

// streamLimit is the most bytes a file of unknown size may have: MaxDownload
// and the free space less DiskMargin (plus what the partial holds), -1 when
// neither is known.
func (p *Puller) streamLimit(have int64) int64 {
	limit := int64(-1)
	if p.cfg.MaxDownload > 0 {
		limit = p.cfg.MaxDownload
	}
	if free, err := p.cfg.freeSpace(p.store.Root()); err == nil && free >= 0 {
		room := max(free-p.cfg.DiskMargin, 0) + have
		if limit < 0 || room < limit {
			limit = room
		}
	}
	return limit
}

// diskError turns a write that failed for lack of space into ErrNoSpace
// (still errors.Is syscall.ENOSPC), with what to do about it.
func (p *Puller) diskError(file string, err error) error {
	if errors.Is(err, syscall.ENOSPC) || errors.Is(err, syscall.EDQUOT) {
		return fmt.Errorf("%w: writing %s under %s: %w (free some space and pull again: the download continues where it stopped)", models.ErrNoSpace, file, p.store.Root(), err)
	}
	return err
}

// hashInto feeds the file at path to v.
func hashInto(ctx context.Context, path string, v *verifier) error {
	f, err := os.Open(path)
	if err != nil {
		return fmt.Errorf("verify: %w", err)
	}
	defer f.Close() //nolint:errcheck // read-only
	if _, err := models.CopyContext(ctx, v, f, nil); err != nil {
		return fmt.Errorf("verify: %w", err)
	}
	return nil
}

// downloadStream fetches the file in one stream, appending to the partial:
// it continues an earlier partial with Range, starts over when the server
// answers 200 to a Range request or the partial belongs to other content,
// and retries failures with backoff. v receives every byte of the file in
// order (the existing prefix first).
func (p *Puller) downloadStream(ctx context.Context, u, name string, sc *models.Sidecar, v *verifier, em *models.Emitter, prog models.Progress) (err error) {
	s := p.store
	f, err := os.OpenFile(s.PartialPath(name), os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return fmt.Errorf("open partial: %w", err)
	}
	defer func() {
		if cerr := f.Close(); cerr != nil && err == nil {
			err = fmt.Errorf("close partial: %w", cerr)
		}
	}()
	fi, err := f.Stat()
	if err != nil {
		return fmt.Errorf("stat partial: %w", err)
	}
	offset := fi.Size()
	if old := s.ReadSidecar(name); old == nil || old.Source != sc.Source || old.Size != sc.Size ||
		old.Digest != sc.Digest || old.ETag != sc.ETag || len(old.Chunks) > 0 || (sc.Size >= 0 && offset > sc.Size) {
		offset = 0
	}
	if err := f.Truncate(offset); err != nil {
		return fmt.Errorf("truncate partial: %w", err)
	}
	if err := s.WriteSidecar(name, sc); err != nil {
		return err
	}
	if offset > 0 { // hash what an earlier run wrote
		if _, err := models.CopyContext(ctx, v, io.NewSectionReader(f, 0, offset), nil); err != nil {
			return fmt.Errorf("read partial: %w", err)
		}
		s.Logger().Info("models: resuming download", "file", prog.File, "from", offset)
	}
	prog.Completed = offset
	em.Emit(prog)
	limit := int64(-1)
	if sc.Size < 0 {
		limit = p.streamLimit(offset)
	}
	b := backoff{cfg: &p.cfg}
	for sc.Size < 0 || offset < sc.Size {
		start := offset
		done, rerr := p.streamOnce(ctx, u, f, &offset, sc.Size, limit, v, em, prog)
		if rerr == nil && done {
			break
		}
		if rerr == errRestart {
			if err := f.Truncate(0); err != nil {
				return fmt.Errorf("truncate partial: %w", err)
			}
			v.sha.Reset()
			if v.git != nil {
				v.git.Reset()
				fmt.Fprintf(v.git, "blob %d\x00", sc.Size)
			}
			v.n, offset = 0, 0
			continue
		}
		if rerr == nil {
			rerr = fmt.Errorf("%w at byte %d of %d", errShortBody, offset, sc.Size)
		}
		if werr := b.wait(ctx, rerr, offset > start); werr != nil {
			return fmt.Errorf("%s: %w", prog.File, werr)
		}
	}
	return nil
}

// errRestart: the partial must be dropped and the download restarted.
var errRestart = errors.New("restart download")

// streamOnce sends one GET from *offset and appends the body to f. It
// returns done when the body ended where the file ends (or at EOF when the
// size is unknown). A file of unknown size is refused with ErrTooLarge when
// its Content-Length or its bytes pass limit (-1: none).
func (p *Puller) streamOnce(ctx context.Context, u string, f *os.File, offset *int64, size, limit int64, v *verifier, em *models.Emitter, prog models.Progress) (bool, error) {
	resp, err := p.getRange(ctx, u, *offset, -1)
	if err != nil {
		var se *statusError
		if errors.As(err, &se) && se.Code == http.StatusRequestedRangeNotSatisfiable {
			if size >= 0 && *offset == size {
				return true, nil
			}
			return false, errRestart
		}
		return false, err
	}
	defer resp.Body.Close() //nolint:errcheck // body fully read or abandoned
	switch {
	case resp.StatusCode == http.StatusOK && *offset > 0:
		p.store.Logger().Info("models: server ignored Range, starting over", "file", prog.File)
		*offset = 0
		if err := f.Truncate(0); err != nil {
			return false, err
		}
		v.sha.Reset()
		if v.git != nil {
			v.git.Reset()
			fmt.Fprintf(v.git, "blob %d\x00", size)
		}
		v.n = 0
	case resp.StatusCode == http.StatusPartialContent:
		start, _, _, ok := parseContentRange(resp.Header.Get("Content-Range"))
		if !ok || start != *offset {
			return false, errRestart
		}
	}
	if _, err := f.Seek(*offset, io.SeekStart); err != nil {
		return false, err
	}
	tooLarge := func() error {
		return fmt.Errorf("%w: %s has more than %d bytes (the bound: --max-download and the free disk space)", models.ErrTooLarge, prog.File, limit)
	}
	var body io.Reader = resp.Body
	switch {
	case size >= 0:
		body = io.LimitReader(resp.Body, size-*offset)
	case limit >= 0:
		if resp.ContentLength >= 0 && *offset+resp.ContentLength > limit {
			return false, tooLarge()
		}
		body = io.LimitReader(resp.Body, limit-*offset+1) // one byte past the bound tells
	}
	var out io.Writer = f
	if wrap := p.partialWriter; wrap != nil {
		out = wrap(f)
	}
	base := *offset
	_, err = models.CopyContext(ctx, io.MultiWriter(out, v), body, func(n int64) {
		*offset = base + n
		prog.Completed = *offset
		em.Emit(prog)
	})
	if err != nil {
		return false, p.diskError(prog.File, err)
	}
	if size < 0 && limit >= 0 && *offset > limit {
		return false, tooLarge()
	}
	return size < 0 || *offset == size, nil
}

// getRange GETs bytes [start, end] of u (end -1: to the end; start 0 and end
// -1: no Range header). It returns 200 and 206 responses, an error otherwise.
func (p *Puller) getRange(ctx context.Context, u string, start, end int64) (*http.Response, error) {
	req, err := p.hub.newRequest(ctx, http.MethodGet, u)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Accept-Encoding", "identity")
	switch {
	case end >= 0:
		req.Header.Set("Range", fmt.Sprintf("bytes=%d-%d", start, end))
	case start > 0:
		req.Header.Set("Range", fmt.Sprintf("bytes=%d-", start))
	}
	resp, err := p.hub.do(req)
	if err != nil {
		return nil, err
	}
	if resp.StatusCode != http.StatusOK && resp.StatusCode != http.StatusPartialContent {
		return nil, newStatusError(resp)
	}
	return resp, nil
}

// parseContentRange parses "bytes START-END/TOTAL" (TOTAL may be "*").
func parseContentRange(h string) (start, end, total int64, ok bool) {
	rest, found := strings.CutPrefix(h, "bytes ")
	if !found {
		return 0, 0, 0, false
	}
	rng, tot, found := strings.Cut(rest, "/")
	if !found {
		return 0, 0, 0, false
	}
	a, b, found := strings.Cut(rng, "-")
	if !found {
		return 0, 0, 0, false
	}
	var err1, err2, err3 error
	start, err1 = strconv.ParseInt(a, 10, 64)
	end, err2 = strconv.ParseInt(b, 10, 64)
	total = -1
	if tot != "*" {
		total, err3 = strconv.ParseInt(tot, 10, 64)
	}
	return start, end, total, err1 == nil && err2 == nil && err3 == nil && start <= end
}
