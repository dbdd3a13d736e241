package models

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path"
	"strings"
	"sync"
)

// PullOptions configures one pull.
type PullOptions struct {
	Name     string // model id to create; default derived from the reference
	Task     Task   // "" infers the task
	Variant  string // ONNX: fetch onnx/model_<Variant>.onnx ("quantized", "fp16", ...)
	Revision string // hub revision (branch, tag or commit); default "main"
}

// Puller pulls models into a store. Concurrent pulls of the same reference
// with the same options in one process share one download; across processes
// the partial files' locks make the second wait and then find the blobs.
type Puller struct {
	store *Store
	cfg   PullConfig
	hub   *hubClient

	mu      sync.Mutex
	flights map[string]*flight
}

// flight is one running pull that callers wait on.
type flight struct {
	done    chan struct{}
	em      *emitter
	cancel  context.CancelFunc
	waiters int // guarded by Puller.mu
	m       *Manifest
	err     error
}

// NewPuller returns a Puller for s. cfg's zero fields take their defaults.
func NewPuller(s *Store, cfg PullConfig) (*Puller, error) {
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
func (p *Puller) prepare(ref string, opts PullOptions) (pullRef, ID, PullOptions, error) {
	r, err := parseRef(ref)
	if err != nil {
		return r, ID{}, opts, err
	}
	if opts.Task != "" {
		if _, err := ParseTask(string(opts.Task)); err != nil {
			return r, ID{}, opts, err
		}
	}
	if opts.Revision == "" {
		opts.Revision = "main"
	}
	var id ID
	if opts.Name != "" {
		id, err = ParseID(opts.Name)
	} else {
		id, err = r.defaultID(opts.Variant)
	}
	if err != nil {
		return r, ID{}, opts, err
	}
	if p.cfg.Offline {
		return r, ID{}, opts, fmt.Errorf("%w: cannot pull %s (use modeld import for local files)", ErrOffline, redactURL(ref))
	}
	if r.kind == SourceURL {
		if err := p.cfg.guard.checkURL(r.url); err != nil {
			return r, ID{}, opts, fmt.Errorf("pull %s: %w", redactURL(ref), err)
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
func (p *Puller) Pull(ctx context.Context, ref string, opts PullOptions, progress ProgressFunc) (*Manifest, error) {
	r, id, opts, err := p.prepare(ref, opts)
	if err != nil {
		return nil, err
	}
	key := strings.Join([]string{ref, id.String(), string(opts.Task), opts.Variant, opts.Revision}, "\x00")

	p.mu.Lock()
	fl, joined := p.flights[key]
	if !joined {
		fctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
		fl = &flight{done: make(chan struct{}), em: newEmitter(p.cfg.ProgressStep), cancel: cancel}
		p.flights[key] = fl
		go func() {
			fl.m, fl.err = p.run(fctx, r, id, opts, fl.em)
			cancel()
			p.mu.Lock()
			if p.flights[key] == fl {
				delete(p.flights, key)
			}
			p.mu.Unlock()
			close(fl.done)
		}()
	}
	fl.waiters++
	unsubscribe := fl.em.subscribe(progress)
	p.mu.Unlock()
	defer unsubscribe()
	if joined && p.store.hooks.flightJoined != nil {
		p.store.hooks.flightJoined(key)
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
func (p *Puller) run(ctx context.Context, r pullRef, id ID, opts PullOptions, em *emitter) (*Manifest, error) {
	s := p.store
	end, err := s.beginActive(ctx)
	if err != nil {
		return nil, err
	}
	defer end()
	var pins pinSet
	defer pins.release()
	for attempt := 0; ; attempt++ {
		m, err := p.pullOnce(ctx, r, id, opts, em, &pins)
		if err == nil {
			em.emit(Progress{Status: StatusSuccess})
			return m, nil
		}
		// A blob vanished between download and manifest (removed by another
		// process): fetch it again.
		if !errors.Is(err, errBlobMissing) || attempt >= 2 {
			return nil, fmt.Errorf("pull %s: %w", redactURL(r.raw), err)
		}
	}
}

// pullOnce resolves, fetches and commits.
func (p *Puller) pullOnce(ctx context.Context, r pullRef, id ID, opts PullOptions, em *emitter, pins *pinSet) (*Manifest, error) {
	now := p.store.now().UTC()
	m := &Manifest{SchemaVersion: ManifestVersion, ID: id.String(), Created: now, Modified: now}
	var err error
	switch r.kind {
	case SourceHub:
		err = p.pullHub(ctx, r, opts, m, em, pins)
	default:
		err = p.pullURL(ctx, r, opts, m, em, pins)
	}
	if err != nil {
		return nil, err
	}
	em.emit(Progress{Status: StatusWriting})
	if err := p.store.commitManifest(m, true); err != nil {
		return nil, err
	}
	return m, nil
}

// pullURL fetches a GGUF file from a plain URL. Its sha256 is checked when
// the server publishes one (X-Linked-Etag, as hub resolve URLs do);
// otherwise the sha256 of what arrived is recorded.
func (p *Puller) pullURL(ctx context.Context, r pullRef, opts PullOptions, m *Manifest, em *emitter, pins *pinSet) error {
	if opts.Variant != "" {
		return fmt.Errorf("%w: --variant applies to ONNX repositories", ErrInvalidRef)
	}
	name := path.Base(r.url.Path)
	if err := checkModelPath(name); err != nil {
		return fmt.Errorf("%w: %w", ErrInvalidRef, err)
	}
	em.emit(Progress{Status: StatusResolving + " " + redactURL(r.raw)})
	rf := remoteFile{Path: name, URL: r.url.String(), Size: -1}
	m.Source = Source{Kind: SourceURL, Ref: redactURL(r.raw), URL: redactURL(r.url.String())}
	return p.addGGUF(ctx, rf, opts, m, em, pins)
}

// pullHub fetches from a hub repository.
func (p *Puller) pullHub(ctx context.Context, r pullRef, opts PullOptions, m *Manifest, em *emitter, pins *pinSet) error {
	em.emit(Progress{Status: StatusResolving + " " + r.raw})
	commit, err := p.hub.revision(ctx, r.repo, opts.Revision)
	if err != nil {
		return err
	}
	entries, err := p.hub.tree(ctx, r.repo, commit)
	if err != nil {
		return err
	}
	m.Source = Source{Kind: SourceHub, Ref: r.raw, Endpoint: redactURL(p.cfg.Endpoint), Repo: r.repo, Revision: opts.Revision, Commit: commit}
	byPath := make(map[string]hubEntry, len(entries))
	paths := make([]string, 0, len(entries))
	hasONNX, hasGGUF := false, false
	for _, e := range entries {
		byPath[e.Path] = e
		paths = append(paths, e.Path)
		lower := strings.ToLower(e.Path)
		hasONNX = hasONNX || (strings.HasPrefix(e.Path, onnxDir) && strings.HasSuffix(lower, ".onnx"))
		hasGGUF = hasGGUF || strings.HasSuffix(lower, ".gguf")
	}
	remote := func(p2 string) remoteFile {
		e := byPath[p2]
		rf := remoteFile{Path: p2, URL: p.hub.resolveURL(r.repo, commit, p2), Size: e.Size}
		if e.LFS != nil && isSHA256Hex(strings.ToLower(e.LFS.OID)) {
			rf.SHA256, rf.Size = strings.ToLower(e.LFS.OID), e.LFS.Size
		} else if len(e.OID) == 40 {
			rf.GitSHA1 = strings.ToLower(e.OID)
		}
		return rf
	}
	switch {
	case r.tag != "" || (!hasONNX && hasGGUF):
		if opts.Variant != "" {
			return fmt.Errorf("%w: --variant applies to ONNX repositories; %s is pulled as GGUF", ErrInvalidRef, r.repo)
		}
		file, err := pickGGUF(paths, r.tag)
		if err != nil {
			return err
		}
		return p.addGGUF(ctx, remote(file), opts, m, em, pins)
	case hasONNX:
		return p.addONNX(ctx, paths, remote, opts, m, em, pins)
	}
	return fmt.Errorf("%w: %s has neither onnx/*.onnx nor .gguf files", ErrRemoteNotFound, r.repo)
}

// addGGUF fetches a GGUF file and fills m from its header.
func (p *Puller) addGGUF(ctx context.Context, rf remoteFile, opts PullOptions, m *Manifest, em *emitter, pins *pinSet) error {
	tasks := []Task{TaskChat}
	if opts.Task != "" {
		var err error
		if tasks, err = overrideTasks(opts.Task, FormatGGUF, nil, false); err != nil {
			return err
		}
	}
	var info *GGUFInfo
	h, n, err := p.fetch(ctx, rf, em, pins, func(file string) (err error) {
		info, err = readGGUF(file, rf.Path)
		return err
	})
	if err != nil {
		return err
	}
	m.Format, m.Tasks, m.GGUF = FormatGGUF, tasks, info
	m.Files = []File{{Path: rf.Path, Digest: digestPrefix + h, Size: n, GitOID: rf.GitSHA1}}
	return nil
}

// addONNX fetches config.json, plans the model's files from it and the
// listing, fetches them and validates them.
func (p *Puller) addONNX(ctx context.Context, paths []string, remote func(string) remoteFile, opts PullOptions, m *Manifest, em *emitter, pins *pinSet) error {
	files := make(map[string]File)
	get := func(p2 string) error {
		if _, ok := files[p2]; ok {
			return nil
		}
		rf := remote(p2)
		h, n, err := p.fetch(ctx, rf, em, pins, nil)
		if err != nil {
			return err
		}
		files[p2] = File{Path: p2, Digest: digestPrefix + h, Size: n, GitOID: rf.GitSHA1}
		return nil
	}
	var cfg []byte
	if hasPath(paths, onnxConfig) {
		if err := get(onnxConfig); err != nil {
			return err
		}
		var err error
		if cfg, err = p.readBlob(files[onnxConfig]); err != nil {
			return err
		}
	}
	plan, err := planONNX(paths, cfg, opts.Variant, opts.Task)
	if err != nil {
		return err
	}
	for _, p2 := range plan.files {
		if err := get(p2); err != nil {
			return err
		}
		m.Files = append(m.Files, files[p2])
	}
	if err := validateONNXFiles(plan, func(p2 string) (*os.File, error) {
		return os.Open(p.store.blobPath(strings.TrimPrefix(files[p2].Digest, digestPrefix)))
	}); err != nil {
		return err
	}
	m.Format, m.Tasks, m.ONNX = FormatONNX, plan.tasks, &plan.info
	return nil
}

// readBlob reads a small blob (config files).
func (p *Puller) readBlob(f File) ([]byte, error) {
	if f.Size > 16<<20 {
		return nil, fmt.Errorf("%w: %s is %d bytes, too large for a config file", ErrInvalidModel, f.Path, f.Size)
	}
	data, err := os.ReadFile(p.store.blobPath(strings.TrimPrefix(f.Digest, digestPrefix)))
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
