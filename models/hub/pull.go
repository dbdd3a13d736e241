package hub

import (
	"slices"

	"github.com/modeld/modeld/models"

	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"strings"
	"sync"
)

// PullOptions configures one pull.
type PullOptions struct {
	Name     string      // model id to create; default derived from the reference
	Task     models.Task // "" infers the task
	Variant  string      // ONNX: fetch onnx/model_<Variant>.onnx ("quantized", "fp16", ...)
	Revision string      // hub revision (branch, tag or commit); default "main"
}

// Puller pulls models into a store. Concurrent pulls of the same reference
// with the same options in one process share one download; across processes
// the partial files' locks make the second wait and then find the blobs.
type Puller struct {
	store *models.Store
	cfg   PullConfig
	hub   *hubClient

	mu      sync.Mutex
	flights map[string]*flight

	// Tests of this package interrupt a pull at chosen points.
	flightJoined  func(key string)          // a Pull joined a running one
	partialWait   func(name string)         // a fetch waits for a partial's lock
	partialWriter func(io.Writer) io.Writer // wraps a streamed download's partial file
}

// pinSet collects the pin releases of one pull.
type pinSet struct{ releases []func() }

func (p *pinSet) add(release func()) { p.releases = append(p.releases, release) }

func (p *pinSet) release() {
	for _, r := range p.releases {
		r()
	}
	p.releases = nil
}

// flight is one running pull that callers wait on.
type flight struct {
	done    chan struct{}
	em      *models.Emitter
	cancel  context.CancelFunc
	waiters int // guarded by Puller.mu
	m       *models.Manifest
	err     error
}

// NewPuller returns a Puller for s. cfg's zero fields take their defaults.
func NewPuller(s *models.Store, cfg PullConfig) (*Puller, error) {
	cfg = cfg.withDefaults()
	hub, err := newHubClient(&cfg)
	if err != nil {
		return nil, err
	}
	p := &Puller{store: s, cfg: cfg, flights: make(map[string]*flight)}
	hub.cfg = &p.cfg
	p.hub = hub
	return p, nil
}

// Check says, without any network access, whether Pull would refuse ref and
// opts at once: a malformed reference, name or task, or offline mode.
func (p *Puller) Check(ref string, opts PullOptions) error {
	_, _, _, err := p.prepare(ref, opts)
	return err
}

// prepare validates a pull request and fills its defaults.
func (p *Puller) prepare(ref string, opts PullOptions) (pullRef, models.ID, PullOptions, error) {
	r, err := parseRef(ref)
	if err != nil {
		return r, models.ID{}, opts, err
	}
	if opts.Task != "" {
		if _, err := models.ParseTask(string(opts.Task)); err != nil {
			return r, models.ID{}, opts, err
		}
	}
	if opts.Revision == "" {
		opts.Revision = "main"
	}
	var id models.ID
	if opts.Name != "" {
		id, err = models.ParseID(opts.Name)
	} else {
		id, err = r.defaultID(opts.Variant)
	}
	if err != nil {
		return r, models.ID{}, opts, err
	}
	if p.cfg.Offline {
		return r, models.ID{}, opts, fmt.Errorf("%w: cannot pull %s (use modeld import for local files)", models.ErrOffline, models.RedactURL(ref))
	}
	if r.kind == models.SourceURL {
		if err := p.cfg.guard.checkURL(r.url); err != nil {
			return r, models.ID{}, opts, fmt.Errorf("pull %s: %w", models.RedactURL(ref), err)
		}
	}
	return r, id, opts, nil
}

// Pull fetches ref into the store and returns the new manifest:
//
//	hf:owner/repo           an ONNX model repository (files its task needs,
//	                        onnx/model.onnx or onnx/model_<Variant>.onnx)
//	hf:owner/repo:Q4_K_M    the GGUF file of that quantization; without a
//	                        tag, the first of DefaultQuantOrder present
//	https://host/.../x.gguf a GGUF file
//
// A model with the same id is replaced (its Created time kept). progress,
// when not nil, receives events until Pull returns. When ctx ends, Pull
// returns; the download stops when no other caller waits for it, and its
// partial files stay for the next Pull to continue.
func (p *Puller) Pull(ctx context.Context, ref string, opts PullOptions, progress models.ProgressFunc) (*models.Manifest, error) {
	r, id, opts, err := p.prepare(ref, opts)
	if err != nil {
		return nil, err
	}
	key := strings.Join([]string{ref, id.String(), string(opts.Task), opts.Variant, opts.Revision}, "\x00")

	p.mu.Lock()
	fl, joined := p.flights[key]
	var fctx context.Context
	if !joined {
		var cancel context.CancelFunc
		fctx, cancel = context.WithCancel(context.WithoutCancel(ctx))
		fl = &flight{done: make(chan struct{}), em: models.NewEmitter(p.cfg.ProgressStep), cancel: cancel}
		p.flights[key] = fl
	}
	fl.waiters++
	// Subscribe before the flight starts, so that its first events (resolving)
	// reach the caller that started it however the goroutines are scheduled.
	unsubscribe := fl.em.Subscribe(progress)
	if !joined {
		go func() {
			fl.m, fl.err = p.run(fctx, r, id, opts, fl.em)
			fl.cancel()
			p.mu.Lock()
			if p.flights[key] == fl {
				delete(p.flights, key)
			}
			p.mu.Unlock()
			close(fl.done)
		}()
	}
	p.mu.Unlock()
	defer unsubscribe()
	if joined && p.flightJoined != nil {
		p.flightJoined(key)
	}

	select {
	case <-fl.done:
		return fl.m, fl.err
	case <-ctx.Done():
		p.mu.Lock()
		fl.waiters--
		last := fl.waiters == 0
		if last {
			// Nobody waits any more: stop the download, and let a new Pull
			// start afresh (it continues the partial files) instead of joining.
			fl.cancel()
			if p.flights[key] == fl {
				delete(p.flights, key)
			}
		}
		p.mu.Unlock()
		if last {
			<-fl.done // the partial files and sidecars are written when Pull returns
		}
		return nil, ctx.Err()
	}
}

// run performs one pull.
func (p *Puller) run(ctx context.Context, r pullRef, id models.ID, opts PullOptions, em *models.Emitter) (*models.Manifest, error) {
	s := p.store
	end, err := s.BeginActive(ctx)
	if err != nil {
		return nil, err
	}
	defer end()
	var pins pinSet
	defer pins.release()
	for attempt := 0; ; attempt++ {
		m, err := p.pullOnce(ctx, r, id, opts, em, &pins)
		if err == nil {
			em.Emit(models.Progress{Status: models.StatusSuccess})
			return m, nil
		}
		// A blob vanished between download and manifest (removed by another
		// process): fetch it again.
		if !errors.Is(err, models.ErrBlobMissing) || attempt >= 2 {
			return nil, fmt.Errorf("pull %s: %w", models.RedactURL(r.raw), err)
		}
	}
}

// pullOnce resolves, fetches and commits.
func (p *Puller) pullOnce(ctx context.Context, r pullRef, id models.ID, opts PullOptions, em *models.Emitter, pins *pinSet) (*models.Manifest, error) {
	now := p.store.Now().UTC()
	m := &models.Manifest{SchemaVersion: models.ManifestVersion, ID: id.String(), Created: now, Modified: now}
	var err error
	switch r.kind {
	case models.SourceHub:
		err = p.pullHub(ctx, r, opts, m, em, pins)
	default:
		err = p.pullURL(ctx, r, opts, m, em, pins)
	}
	if err != nil {
		return nil, err
	}
	em.Emit(models.Progress{Status: models.StatusWriting})
	if err := p.store.CommitManifest(m); err != nil {
		return nil, err
	}
	return m, nil
}

// pullURL fetches a GGUF file from a plain URL. Its sha256 is checked when
// the server publishes one (X-Linked-Etag, as hub resolve URLs do);
// otherwise the sha256 of what arrived is recorded.
func (p *Puller) pullURL(ctx context.Context, r pullRef, opts PullOptions, m *models.Manifest, em *models.Emitter, pins *pinSet) error {
	if opts.Variant != "" {
		return fmt.Errorf("%w: --variant applies to ONNX repositories", models.ErrInvalidRef)
	}
	name := path.Base(r.url.Path)
	if err := models.CheckModelPath(name); err != nil {
		return fmt.Errorf("%w: %w", models.ErrInvalidRef, err)
	}
	em.Emit(models.Progress{Status: models.StatusResolving + " " + models.RedactURL(r.raw)})
	rf := remoteFile{Path: name, URL: r.url.String(), Size: -1}
	m.Source = models.Source{Kind: models.SourceURL, Ref: models.RedactURL(r.raw), URL: models.RedactURL(r.url.String())}
	return p.addGGUF(ctx, rf, opts, m, em, pins)
}

// pullHub fetches from a hub repository.
func (p *Puller) pullHub(ctx context.Context, r pullRef, opts PullOptions, m *models.Manifest, em *models.Emitter, pins *pinSet) error {
	em.Emit(models.Progress{Status: models.StatusResolving + " " + r.raw})
	commit, err := p.hub.revision(ctx, r.repo, opts.Revision)
	if err != nil {
		return err
	}
	entries, err := p.hub.tree(ctx, r.repo, commit)
	if err != nil {
		return err
	}
	m.Source = models.Source{Kind: models.SourceHub, Ref: r.raw, Endpoint: models.RedactURL(p.cfg.Endpoint), Repo: r.repo, Revision: opts.Revision, Commit: commit}
	byPath := make(map[string]hubEntry, len(entries))
	paths := make([]string, 0, len(entries))
	hasONNX, hasGGUF := false, false
	for _, e := range entries {
		byPath[e.Path] = e
		paths = append(paths, e.Path)
		lower := strings.ToLower(e.Path)
		hasONNX = hasONNX || (strings.HasPrefix(e.Path, models.ONNXDir) && strings.HasSuffix(lower, ".onnx"))
		hasGGUF = hasGGUF || strings.HasSuffix(lower, ".gguf")
	}
	remote := func(p2 string) remoteFile {
		e := byPath[p2]
		rf := remoteFile{Path: p2, URL: p.hub.resolveURL(r.repo, commit, p2), Size: e.Size}
		if e.LFS != nil && models.IsSHA256Hex(strings.ToLower(e.LFS.OID)) {
			rf.SHA256, rf.Size = strings.ToLower(e.LFS.OID), e.LFS.Size
		} else if len(e.OID) == 40 {
			rf.GitSHA1 = strings.ToLower(e.OID)
		}
		return rf
	}
	switch {
	case r.tag != "" || (!hasONNX && hasGGUF):
		if opts.Variant != "" {
			return fmt.Errorf("%w: --variant applies to ONNX repositories; %s is pulled as GGUF", models.ErrInvalidRef, r.repo)
		}
		file, err := models.PickGGUF(paths, r.tag)
		if err != nil {
			return err
		}
		if err := p.addGGUF(ctx, remote(file), opts, m, em, pins); err != nil {
			return err
		}
		if proj := models.PickProjector(paths); proj != "" && slices.Contains(m.Tasks, models.TaskChat) {
			return p.addProjector(ctx, remote(proj), m, em, pins)
		}
		return nil
	case hasONNX:
		return p.addONNX(ctx, paths, remote, opts, m, em, pins)
	}
	return fmt.Errorf("%w: %s has neither onnx/*.onnx nor .gguf files", models.ErrRemoteNotFound, r.repo)
}

// addGGUF fetches a GGUF file and fills m from its header.
func (p *Puller) addGGUF(ctx context.Context, rf remoteFile, opts PullOptions, m *models.Manifest, em *models.Emitter, pins *pinSet) error {
	tasks, err := models.GGUFTasks(opts.Task)
	if err != nil {
		return err
	}
	var info *models.GGUFInfo
	h, n, err := p.fetch(ctx, rf, em, pins, func(file string) (err error) {
		info, err = models.ReadGGUF(file, rf.Path)
		return err
	})
	if err != nil {
		return err
	}
	m.Format, m.Tasks, m.GGUF = models.FormatGGUF, tasks, info
	m.Files = []models.File{{Path: rf.Path, Digest: models.DigestPrefix + h, Size: n, GitOID: rf.GitSHA1}}
	return nil
}

// addProjector fetches a chat model's multimodal projector from its
// repository, checks that it is one, and keeps it with the model (as
// modeld import --mmproj does).
func (p *Puller) addProjector(ctx context.Context, rf remoteFile, m *models.Manifest, em *models.Emitter, pins *pinSet) error {
	h, n, err := p.fetch(ctx, rf, em, pins, func(file string) error {
		_, err := models.ReadProjector(file, rf.Path, m.GGUF.File)
		return err
	})
	if err != nil {
		return fmt.Errorf("the projector %s: %w", rf.Path, err)
	}
	m.GGUF.Projector = rf.Path
	m.Files = append(m.Files, models.File{Path: rf.Path, Digest: models.DigestPrefix + h, Size: n, GitOID: rf.GitSHA1})
	return nil
}

// addONNX fetches config.json, plans the model's files from it and the
// listing, fetches them and validates them.
func (p *Puller) addONNX(ctx context.Context, paths []string, remote func(string) remoteFile, opts PullOptions, m *models.Manifest, em *models.Emitter, pins *pinSet) error {
	files := make(map[string]models.File)
	get := func(p2 string) error {
		if _, ok := files[p2]; ok {
			return nil
		}
		rf := remote(p2)
		h, n, err := p.fetch(ctx, rf, em, pins, nil)
		if err != nil {
			return err
		}
		files[p2] = models.File{Path: p2, Digest: models.DigestPrefix + h, Size: n, GitOID: rf.GitSHA1}
		return nil
	}
	var cfg []byte
	if hasPath(paths, models.ONNXConfig) {
		if err := get(models.ONNXConfig); err != nil {
			return err
		}
		var err error
		if cfg, err = p.readBlob(files[models.ONNXConfig]); err != nil {
			return err
		}
	}
	plan, err := models.PlanONNX(paths, cfg, opts.Variant, opts.Task)
	if err != nil {
		return err
	}
	for _, p2 := range plan.Files() {
		if err := get(p2); err != nil {
			return err
		}
		m.Files = append(m.Files, files[p2])
	}
	if err := models.ValidateONNXFiles(plan, func(p2 string) (*os.File, error) {
		return p.store.OpenBlob(strings.TrimPrefix(files[p2].Digest, models.DigestPrefix))
	}); err != nil {
		return err
	}
	info := plan.Info()
	m.Format, m.Tasks, m.ONNX = models.FormatONNX, plan.Tasks(), &info
	return nil
}

// readBlob reads a small blob (config files).
func (p *Puller) readBlob(f models.File) ([]byte, error) {
	if f.Size > 16<<20 {
		return nil, fmt.Errorf("%w: %s is %d bytes, too large for a config file", models.ErrInvalidModel, f.Path, f.Size)
	}
	file, err := p.store.BlobPath(f.Digest)
	if err != nil {
		return nil, err
	}
	data, err := os.ReadFile(file)
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", f.Path, err)
	}
	return data, nil
}

func hasPath(paths []string, want string) bool {
	for _, p := range paths {
		if p == want {
			return true
		}
	}
	return false
}
