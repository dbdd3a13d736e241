package ollama

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"math"
	"net/http"
	"strings"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/modeld/modeld/api/core"
	"github.com/modeld/modeld/backends"
	"github.com/modeld/modeld/cache"
	"github.com/modeld/modeld/models"
	"github.com/modeld/modeld/models/hub"
)

// Ollama's model routes (tags, show, ps, pull, delete, copy) and its
// version, on the store, the puller and the cache.

// OllamaDetails are a model's details in Ollama's listings.
type OllamaDetails struct {
	ParentModel       string   `json:"parent_model"`
	Format            string   `json:"format"`
	Family            string   `json:"family"`
	Families          []string `json:"families"`
	ParameterSize     string   `json:"parameter_size"`
	QuantizationLevel string   `json:"quantization_level"`
}

// OllamaModel is an entry of /api/tags and /api/ps.
type OllamaModel struct {
	Name       string        `json:"name"`
	Model      string        `json:"model"`
	ModifiedAt time.Time     `json:"modified_at,omitzero"`
	Size       int64         `json:"size"`
	Digest     string        `json:"digest"`
	Details    OllamaDetails `json:"details"`
	// /api/ps only.
	ExpiresAt     *time.Time `json:"expires_at,omitempty"`
	SizeVRAM      *int64     `json:"size_vram,omitempty"`
	ContextLength uint64     `json:"context_length,omitempty"`
}

// ollamaName is a modeld id as Ollama writes names: always with a tag.
func ollamaName(id string) string {
	p, err := models.ParseID(id)
	if err != nil {
		return id
	}
	return p.Name + ":" + p.Tag
}

// ollamaDigest stands for a manifest's digest: the sha256 of its id and
// its files' digests, which changes when its content does.
func ollamaDigest(m *models.Manifest) string {
	h := sha256.New()
	h.Write([]byte(m.ID))
	for _, f := range m.Files {
		h.Write([]byte("\x00" + f.Path + "\x00" + f.Digest))
	}
	return hex.EncodeToString(h.Sum(nil))
}

// humanParams writes a parameter count as Ollama does ("494.03M", "7.6B").
func humanParams(n uint64) string {
	switch {
	case n == 0:
		return ""
	case n >= 1e9:
		return fmt.Sprintf("%.1fB", float64(n)/1e9)
	case n >= 1e6:
		return fmt.Sprintf("%.2fM", float64(n)/1e6)
	case n >= 1e3:
		return fmt.Sprintf("%.2fK", float64(n)/1e3)
	}
	return fmt.Sprint(n)
}

func ollamaDetails(m *models.Manifest) OllamaDetails {
	d := OllamaDetails{Format: string(m.Format), QuantizationLevel: m.Quantization()}
	switch {
	case m.GGUF != nil:
		d.Family, d.ParameterSize = m.GGUF.Architecture, humanParams(m.GGUF.Parameters)
	case m.ONNX != nil:
		d.Family = m.ONNX.ModelType
	}
	if d.Family != "" {
		d.Families = []string{d.Family}
	}
	return d
}

func (h *ollama) listing(m *models.Manifest) OllamaModel {
	n := ollamaName(m.ID)
	return OllamaModel{Name: n, Model: n, ModifiedAt: m.Modified, Size: m.Size(), Digest: ollamaDigest(m), Details: ollamaDetails(m)}
}

// store is the store, or a 503 when the daemon has none.
func (h *ollama) store() (*models.Store, error) {
	if h.o.Store == nil {
		return nil, &core.Error{Status: http.StatusServiceUnavailable, Type: "server_error", Message: "no model store is configured"}
	}
	return h.o.Store, nil
}

func (h *ollama) tags(c *gin.Context) {
	st, err := h.store()
	if err != nil {
		ollamaError(c, err, "")
		return
	}
	ms, err := st.List()
	if err != nil {
		ollamaError(c, err, "")
		return
	}
	out := make([]OllamaModel, 0, len(ms))
	for _, m := range ms {
		out = append(out, h.listing(m))
	}
	c.JSON(http.StatusOK, gin.H{"models": out})
}

// ollamaNamed is a body that names one model: Ollama's clients send model,
// older ones name.
type ollamaNamed struct {
	Model   string `json:"model"`
	Name    string `json:"name"`
	Verbose bool   `json:"verbose"`
}

func (n ollamaNamed) id() string {
	if n.Model != "" {
		return n.Model
	}
	return n.Name
}

// get reads a body naming a model and returns the model's manifest.
func (h *ollama) get(c *gin.Context) (*models.Manifest, string, bool) {
	var req ollamaNamed
	if err := core.DecodeJSON(c, &req); err != nil {
		ollamaError(c, err, "")
		return nil, "", false
	}
	name := req.id()
	if name == "" {
		ollamaError(c, core.BadRequest("model", "model is required"), "")
		return nil, "", false
	}
	st, err := h.store()
	if err != nil {
		ollamaError(c, err, name)
		return nil, "", false
	}
	m, err := st.Get(ollamaID(name))
	if err != nil {
		ollamaError(c, err, name)
		return nil, "", false
	}
	return m, name, true
}

func (h *ollama) ps(c *gin.Context) {
	out := []OllamaModel{}
	if h.s.Opt.Cache == nil {
		c.JSON(http.StatusOK, gin.H{"models": out})
		return
	}
	now := time.Now()
	for _, st := range h.s.Opt.Cache.Snapshot().Models {
		if st.State == "unloading" {
			continue
		}
		n := ollamaName(st.ID)
		e := OllamaModel{Name: n, Model: n, Size: st.SizeBytes, Details: OllamaDetails{Format: ""}}
		if h.o.Store != nil {
			if m, err := h.o.Store.Get(st.ID); err == nil {
				e.Digest, e.Details, e.ModifiedAt = ollamaDigest(m), ollamaDetails(m), m.Modified
				if m.GGUF != nil {
					e.ContextLength = uint64(backends.EffectiveContext(int(min(m.GGUF.ContextLength, math.MaxInt32)), h.s.ContextCap()))
				}
			}
		}
		exp := st.ExpiresAt
		switch {
		case !exp.IsZero():
		case st.KeepAlive < 0: // kept loaded
			exp = now.AddDate(100, 0, 0)
		default: // busy: it expires its keep-alive after the last request
			exp = now.Add(st.KeepAlive)
		}
		vram := st.VRAMBytes
		e.ExpiresAt, e.SizeVRAM = &exp, &vram
		out = append(out, e)
	}
	c.JSON(http.StatusOK, gin.H{"models": out})
}

// OllamaPullRequest is the body of POST /api/pull.
type OllamaPullRequest struct {
	Model    string `json:"model"`
	Name     string `json:"name"`
	Insecure bool   `json:"insecure"`
	Stream   *bool  `json:"stream"`
}

// OllamaProgress is one object of /api/pull's answer.
type OllamaProgress struct {
	Status    string `json:"status"`
	Digest    string `json:"digest,omitempty"`
	Total     int64  `json:"total,omitempty"`
	Completed int64  `json:"completed,omitempty"`
}

// ollamaPullRef is the puller's reference of an Ollama model name: a
// reference the puller knows (hf:..., https://...) as it is, and an
// owner/repo[:tag] name as that hub repository (":latest" taking the
// default file).
func ollamaPullRef(name string) string {
	if strings.HasPrefix(name, "hf:") || strings.Contains(name, "://") {
		return name
	}
	return "hf:" + strings.TrimSuffix(name, ":"+models.DefaultTag)
}

// ollamaProgress turns the store's progress into Ollama's statuses.
func ollamaProgress(p models.Progress) OllamaProgress {
	short := strings.TrimPrefix(p.Digest, "sha256:")
	if len(short) > 12 {
		short = short[:12]
	}
	if short == "" {
		short = p.File
	}
	is := func(status string) bool { return strings.HasPrefix(p.Status, status) } // "resolving hf:...", ...
	switch {
	case is(models.StatusResolving):
		return OllamaProgress{Status: "pulling manifest"}
	case is(models.StatusPulling):
		return OllamaProgress{Status: "pulling " + short, Digest: p.Digest, Total: p.Total, Completed: p.Completed}
	case is(models.StatusExists):
		return OllamaProgress{Status: "pulling " + short, Digest: p.Digest, Total: p.Total, Completed: p.Total}
	case is(models.StatusVerifying):
		return OllamaProgress{Status: "verifying sha256 digest"}
	case is(models.StatusWriting):
		return OllamaProgress{Status: "writing manifest"}
	}
	return OllamaProgress{Status: p.Status, Digest: p.Digest, Total: p.Total, Completed: p.Completed}
}

func (h *ollama) pull(c *gin.Context) {
	var req OllamaPullRequest
	if err := core.DecodeJSON(c, &req); err != nil {
		ollamaError(c, err, "")
		return
	}
	name := req.Model
	if name == "" {
		name = req.Name
	}
	if name == "" {
		ollamaError(c, core.BadRequest("model", "model is required (owner/repo[:QUANT], hf:owner/repo[:QUANT] or an https:// URL of a .gguf file)"), "")
		return
	}
	if h.o.Puller == nil {
		ollamaError(c, &core.Error{Status: http.StatusServiceUnavailable, Type: "server_error", Message: "pulling is not available in this daemon"}, name)
		return
	}
	ref := ollamaPullRef(name)
	var opts hub.PullOptions
	if err := h.o.Puller.Check(ref, opts); err != nil {
		ollamaError(c, err, name)
		return
	}
	if !streamOf(req.Stream) {
		if _, err := h.o.Puller.Pull(c.Request.Context(), ref, opts, func(models.Progress) {}); err != nil {
			ollamaError(c, err, name)
			return
		}
		c.JSON(http.StatusOK, OllamaProgress{Status: models.StatusSuccess})
		return
	}
	c.Header("Content-Type", "application/x-ndjson")
	c.Header("Cache-Control", "no-store")
	c.Status(http.StatusOK)
	c.Writer.Flush()
	nd := core.NewNDJSONWriter(c.Writer)
	// Pull calls the progress function from its own goroutine, never after it returns.
	_, err := h.o.Puller.Pull(c.Request.Context(), ref, opts, func(p models.Progress) {
		if p.Status != models.StatusSuccess { // sent below
			_ = nd.Send(ollamaProgress(p))
		}
	})
	if err != nil {
		_ = nd.Send(gin.H{"error": core.ToAPIError(core.AsCut(c, err)).Message})
		return
	}
	_ = nd.Send(OllamaProgress{Status: models.StatusSuccess})
}

// remove deletes exactly the model it names: ids are lowercase, and while
// the other Ollama routes fold a name's case (as Ollama does), a name that
// is not already an id's spelling deletes nothing (404, naming the id it
// may have meant).
func (h *ollama) remove(c *gin.Context) {
	m, name, ok := h.get(c)
	if !ok {
		return
	}
	if name != ollamaID(name) {
		ollamaError(c, &core.Error{Status: http.StatusNotFound, Type: "invalid_request_error", Code: "model_not_found",
			Message: fmt.Sprintf("model '%s' not found; ids are lowercase: to delete %s, name it so", core.Clip(name), m.ID)}, "")
		return
	}
	if h.o.Unloader != nil {
		if err := h.o.Unloader.Unload(c.Request.Context(), m.ID, true); err != nil && !errors.Is(err, cache.ErrNotLoaded) {
			ollamaError(c, fmt.Errorf("unload %s before deleting it: %w", m.ID, err), name)
			return
		}
	}
	if _, err := h.o.Store.Remove(c.Request.Context(), m.ID); err != nil {
		ollamaError(c, err, name)
		return
	}
	c.Status(http.StatusOK)
}

// OllamaCopyRequest is the body of POST /api/copy.
type OllamaCopyRequest struct {
	Source      string `json:"source"`
	Destination string `json:"destination"`
}

// copy makes destination a second name of source's content: a manifest
// naming the same blobs, so nothing is copied on disk. A destination that
// is already a model is left as it is (409: delete it first); a copy onto
// the source itself changes nothing.
func (h *ollama) copy(c *gin.Context) {
	var req OllamaCopyRequest
	if err := core.DecodeJSON(c, &req); err != nil {
		ollamaError(c, err, "")
		return
	}
	if req.Source == "" || req.Destination == "" {
		ollamaError(c, core.BadRequest("source", "source and destination are required"), "")
		return
	}
	st, err := h.store()
	if err != nil {
		ollamaError(c, err, "")
		return
	}
	m, err := st.Get(ollamaID(req.Source))
	if err != nil {
		ollamaError(c, err, req.Source)
		return
	}
	dst, err := models.Canonical(ollamaID(req.Destination))
	if err != nil {
		ollamaError(c, core.BadRequest("destination", "destination: %v", err), "")
		return
	}
	if dst == m.ID {
		c.Status(http.StatusOK)
		return
	}
	cp := *m
	cp.ID, cp.Files, cp.Modified = dst, append([]models.File(nil), m.Files...), time.Now().UTC()
	if err := st.AddManifest(&cp); err != nil {
		if errors.Is(err, models.ErrExists) {
			err = &core.Error{Status: http.StatusConflict, Type: "invalid_request_error", Code: "model_exists",
				Message: fmt.Sprintf("destination model '%s' already exists; delete it first to replace it", dst)}
		}
		ollamaError(c, err, req.Source)
		return
	}
	c.Status(http.StatusOK)
}

func (h *ollama) version(c *gin.Context) {
	c.JSON(http.StatusOK, gin.H{"version": h.s.Opt.Version})
}
