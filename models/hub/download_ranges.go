package hub

import (
	"github.com/modeld/modeld/models"

	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"sync"
)

// errRangeIgnored: the server answered a Range request with the whole file.
var errRangeIgnored = errors.New("server ignores Range requests")

// rangeDownload is the shared state of one parallel download.
type rangeDownload struct {
	p    *Puller
	u    string
	name string
	f    *os.File
	em   *models.Emitter

	mu        sync.Mutex // guards everything below
	sc        *models.Sidecar
	completed int64
	unsaved   int64 // bytes written since the sidecar was last saved
	prog      models.Progress
}

// downloadRanges fetches a large file as several ranges at once into one
// preallocated partial file. The sidecar records how far each range got, so
// an interrupted download (cancelled, killed, failed) continues every range
// where it stopped. errRangeIgnored means the server does not do ranges.
func (p *Puller) downloadRanges(ctx context.Context, u, name string, want *models.Sidecar, em *models.Emitter, prog models.Progress) (err error) {
	s := p.store
	path := s.PartialPath(name)
	sc := s.ReadSidecar(name)
	fi, statErr := os.Stat(path)
	resumable := sc != nil && statErr == nil && fi.Size() == want.Size && len(sc.Chunks) > 0 &&
		sc.Source == want.Source && sc.Size == want.Size && sc.Digest == want.Digest && sc.ETag == want.ETag
	if !resumable {
		sc = want
		sc.Chunks = splitRanges(want.Size, p.cfg.Parallel*4)
	}
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return fmt.Errorf("open partial: %w", err)
	}
	defer func() {
		if cerr := f.Close(); cerr != nil && err == nil {
			err = fmt.Errorf("close partial: %w", cerr)
		}
	}()
	if !resumable {
		if err := f.Truncate(want.Size); err != nil {
			return fmt.Errorf("preallocate partial: %w", err)
		}
	}
	if err := s.WriteSidecar(name, sc); err != nil {
		return err
	}
	d := &rangeDownload{p: p, u: u, name: name, f: f, em: em, sc: sc, prog: prog}
	for _, c := range sc.Chunks {
		d.completed += c.Done
	}
	if resumable && d.completed > 0 {
		s.Logger().Info("models: resuming ranged download", "file", prog.File, "done", d.completed, "of", want.Size)
	}
	d.prog.Completed = d.completed
	em.Emit(d.prog)

	rctx, cancel := context.WithCancel(ctx)
	defer cancel()
	work := make(chan int)
	errs := make(chan error, p.cfg.Parallel)
	var wg sync.WaitGroup
	for w := 0; w < p.cfg.Parallel; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range work {
				if err := d.fetchChunk(rctx, i); err != nil {
					errs <- err
					cancel()
					return
				}
			}
		}()
	}
feed:
	for i, c := range sc.Chunks {
		if c.Done >= c.End-c.Start {
			continue
		}
		select {
		case work <- i:
		case <-rctx.Done():
			break feed
		}
	}
	close(work)
	wg.Wait()
	close(errs)
	d.mu.Lock()
	saveErr := s.WriteSidecar(name, d.sc)
	d.mu.Unlock()
	var first error
	for e := range errs {
		if first == nil || errors.Is(e, errRangeIgnored) {
			first = e
		}
	}
	if first == nil {
		first = ctx.Err()
	}
	if first != nil {
		return first
	}
	return saveErr
}

// splitRanges cuts size bytes into at most n ranges of near-equal size.
func splitRanges(size int64, n int) []models.Chunk {
	if int64(n) > size {
		n = int(size)
	}
	if n < 1 {
		n = 1
	}
	step := (size + int64(n) - 1) / int64(n)
	var out []models.Chunk
	for start := int64(0); start < size; start += step {
		end := min(start+step, size)
		out = append(out, models.Chunk{Start: start, End: end})
	}
	return out
}

// fetchChunk downloads what is missing of chunk i, retrying with backoff.
func (d *rangeDownload) fetchChunk(ctx context.Context, i int) error {
	b := backoff{cfg: &d.p.cfg}
	for {
		d.mu.Lock()
		c := d.sc.Chunks[i]
		d.mu.Unlock()
		if c.Done >= c.End-c.Start {
			return nil
		}
		before := c.Done
		err := d.fetchChunkOnce(ctx, i, c)
		if err == nil {
			continue // the loop head checks whether it is complete
		}
		if errors.Is(err, errRangeIgnored) {
			return err
		}
		d.mu.Lock()
		progressed := d.sc.Chunks[i].Done > before
		d.mu.Unlock()
		if werr := b.wait(ctx, err, progressed); werr != nil {
			return fmt.Errorf("%s bytes %d-%d: %w", d.prog.File, c.Start, c.End-1, werr)
		}
	}
}

// fetchChunkOnce sends one Range request for the rest of chunk i.
func (d *rangeDownload) fetchChunkOnce(ctx context.Context, i int, c models.Chunk) error {
	from := c.Start + c.Done
	resp, err := d.p.getRange(ctx, d.u, from, c.End-1)
	if err != nil {
		return err
	}
	defer resp.Body.Close() //nolint:errcheck // body read or abandoned
	if resp.StatusCode == http.StatusOK {
		return errRangeIgnored
	}
	start, end, _, ok := parseContentRange(resp.Header.Get("Content-Range"))
	if !ok || start != from || end != c.End-1 {
		return fmt.Errorf("%w: asked bytes %d-%d, got Content-Range %q", errShortBody, from, c.End-1, resp.Header.Get("Content-Range"))
	}
	buf := make([]byte, 256<<10)
	pos := from
	body := io.LimitReader(resp.Body, c.End-from)
	for pos < c.End {
		if err := ctx.Err(); err != nil {
			return err
		}
		n, rerr := body.Read(buf)
		if n > 0 {
			if _, err := d.f.WriteAt(buf[:n], pos); err != nil {
				return d.p.diskError(d.prog.File, fmt.Errorf("write partial: %w", err))
			}
			pos += int64(n)
			d.advance(i, int64(n))
		}
		if rerr == io.EOF {
			break
		}
		if rerr != nil {
			return rerr
		}
	}
	if pos < c.End {
		return fmt.Errorf("%w: bytes %d-%d stopped at %d", errShortBody, from, c.End-1, pos)
	}
	return nil
}

// advance records n more bytes of chunk i, saves the sidecar every
// SidecarEvery bytes, and reports progress.
func (d *rangeDownload) advance(i int, n int64) {
	d.mu.Lock()
	d.sc.Chunks[i].Done += n
	d.completed += n
	d.unsaved += n
	var err error
	if d.unsaved >= d.p.cfg.SidecarEvery {
		d.unsaved = 0
		err = d.p.store.WriteSidecar(d.name, d.sc)
	}
	prog := d.prog
	prog.Completed = d.completed
	d.mu.Unlock()
	if err != nil {
		d.p.store.Logger().Warn("models: record download progress", "file", prog.File, "err", err)
	}
	d.em.Emit(prog)
}
