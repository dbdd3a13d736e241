package store

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"net/http"
	"slices"
	"strings"

	"github.com/gin-gonic/gin"

	"github.com/modeld/modeld/api/core"
	"github.com/modeld/modeld/backends"
	"github.com/modeld/modeld/cache"
	"github.com/modeld/modeld/models"
	"github.com/modeld/modeld/models/hub"
)

// Register adds the model store routes:
//
//	GET    /v1/models        OpenAI list, each entry with task(s), format, size_bytes, context_length
//	                         (and context_window, the same number, for clients that read that name),
//	                         input_modalities, aliases, and the disk use of each model (unique_bytes,
//	                         shared_bytes) and of the store (disk_usage), as modeld du counts them
//	GET    /v1/models/{id}   one model (ids may contain '/'; an alias answers its model)
//	DELETE /v1/models/{id}   unload (?force=true waits for in-flight requests) then delete
//	POST   /v1/models/pull   pull, streaming progress as NDJSON
func Register(s *core.Core, o core.ModelsOptions) {
	// A GGUF model's context_length is backends.EffectiveContext under the
	// server's context cap (Options.ContextCap), as the daemon loads it.
	h := &modelHandlers{o: o, contextCap: s.ContextCap()}
	s.Engine.GET("/v1/models", h.list)
	s.Engine.GET("/v1/models/*id", h.get)
	s.Engine.DELETE("/v1/models/*id", h.remove)
	s.Engine.POST("/v1/models/pull", h.pull)
}

type modelHandlers struct {
	o          core.ModelsOptions
	contextCap int
}

// ModelObject is an OpenAI model object with modeld's additions.
type ModelObject struct {
	ID             string        `json:"id"`
	Object         string        `json:"object"` // "model"
	Created        int64         `json:"created"`
	OwnedBy        string        `json:"owned_by"`
	Task           models.Task   `json:"task"` // the first task
	Tasks          []models.Task `json:"tasks"`
	Format         models.Format `json:"format"`
	SizeBytes      int64         `json:"size_bytes"`
	ContextLength  uint64        `json:"context_length,omitempty"`         // the context a request gets
	ContextWindow  uint64        `json:"context_window,omitempty"`         // ContextLength under the name agents read
	TrainedContext uint64        `json:"trained_context_length,omitempty"` // the model's own
	// InputModalities are what a request may send the model: text for every
	// chat model, and image for one imported with its multimodal projector.
	InputModalities []string `json:"input_modalities,omitempty"`
	// Aliases are the --model-aliases patterns that name this model.
	Aliases      []string `json:"aliases,omitempty"`
	Quantization string   `json:"quantization,omitempty"`
	Modified     int64    `json:"modified"`
	// Disk use as modeld du counts it (GET /v1/models only): bytes of
	// blobs only this model uses (deleting it frees them) and bytes of blobs
	// it shares with the models named.
	UniqueBytes *int64           `json:"unique_bytes,omitempty"`
	SharedBytes *int64           `json:"shared_bytes,omitempty"`
	SharedWith  []string         `json:"shared_with,omitempty"`
	Files       []models.File    `json:"files,omitempty"`  // GET /v1/models/{id} only
	Source      *models.Source   `json:"source,omitempty"` // GET /v1/models/{id} only
	GGUF        *models.GGUFInfo `json:"gguf,omitempty"`   // GET /v1/models/{id} only
	ONNX        *models.ONNXInfo `json:"onnx,omitempty"`   // GET /v1/models/{id} only
	// Broken says why the model cannot be used (models.Manifest.Broken).
	Broken string `json:"broken,omitempty"`
}

func modelObject(m *models.Manifest, detailed bool, contextCap int) ModelObject {
	o := ModelObject{
		ID: m.ID, Object: "model", Created: m.Created.Unix(), OwnedBy: "modeld",
		Tasks: m.Tasks, Format: m.Format, SizeBytes: m.Size(), ContextLength: m.ContextLength(),
		TrainedContext: m.ContextLength(), Quantization: m.Quantization(), Modified: m.Modified.Unix(),
		Broken: m.Broken(),
	}
	if m.Format == models.FormatGGUF {
		o.ContextLength = uint64(backends.EffectiveContext(int(min(o.TrainedContext, math.MaxInt32)), contextCap))
	}
	o.ContextWindow = o.ContextLength
	if slices.Contains(m.Tasks, models.TaskChat) {
		o.InputModalities = []string{"text"}
		if m.GGUF != nil && m.GGUF.Projector != "" {
			o.InputModalities = append(o.InputModalities, "image")
		}
	}
	if len(m.Tasks) > 0 {
		o.Task = m.Tasks[0]
	}
	if detailed {
		src := m.Source
		o.Files, o.Source, o.GGUF, o.ONNX = m.Files, &src, m.GGUF, m.ONNX
	}
	return o
}

func (h *modelHandlers) list(c *gin.Context) {
	ms, err := h.o.Store.List()
	if err != nil {
		core.WriteError(c, err)
		return
	}
	// Disk use is an addition: a store that cannot be walked still lists.
	du, duErr := h.o.Store.DiskUsage()
	byID := map[string]models.ModelUsage{}
	if duErr == nil {
		for _, u := range du.Models {
			byID[u.ID] = u
		}
	}
	data := make([]ModelObject, 0, len(ms))
	for _, m := range ms {
		o := h.object(m, false)
		if u, ok := byID[m.ID]; ok {
			o.UniqueBytes, o.SharedBytes, o.SharedWith = &u.Unique, &u.Shared, u.SharedWith
		}
		data = append(data, o)
	}
	out := gin.H{"object": "list", "data": data}
	if duErr == nil {
		out["disk_usage"] = gin.H{"blobs": du.Blobs, "manifests": du.Manifests, "partials": du.Partials,
			"orphans": du.Orphans, "other": du.Other, "total": du.Total}
	}
	c.JSON(http.StatusOK, out)
}

// idParam returns the catch-all id without its leading '/'.
func idParam(c *gin.Context) string { return strings.TrimPrefix(c.Param("id"), "/") }

func (h *modelHandlers) get(c *gin.Context) {
	id := idParam(c)
	if h.o.Resolve != nil {
		id = h.o.Resolve(id)
	}
	m, err := h.o.Store.Get(id)
	if err != nil {
		core.WriteError(c, err)
		return
	}
	c.JSON(http.StatusOK, h.object(m, true))
}

// object is modelObject with the model's aliases.
func (h *modelHandlers) object(m *models.Manifest, detailed bool) ModelObject {
	o := modelObject(m, detailed, h.contextCap)
	if h.o.Aliases != nil {
		o.Aliases = h.o.Aliases(m.ID)
	}
	return o
}

func (h *modelHandlers) remove(c *gin.Context) {
	id := idParam(c)
	force := c.Query("force") == "true" || c.Query("force") == "1"
	m, err := h.o.Store.Get(id)
	if errors.Is(err, models.ErrCorruptManifest) { // removed all the same
		pid, _ := models.ParseID(id) // Get parsed it
		m, err = &models.Manifest{ID: pid.String()}, nil
	}
	if err != nil {
		core.WriteError(c, err)
		return
	}
	if h.o.Unloader != nil {
		err := h.o.Unloader.Unload(c.Request.Context(), m.ID, force)
		switch {
		case err == nil, errors.Is(err, cache.ErrNotLoaded):
		case errors.Is(err, cache.ErrInUse):
			core.WriteError(c, &core.Error{Status: http.StatusConflict, Type: "invalid_request_error", Code: "model_in_use",
				Message: fmt.Sprintf("%v; retry with ?force=true (modeld rm --force %s) to wait for the requests and unload it", err, m.ID)})
			return
		default:
			core.WriteError(c, fmt.Errorf("unload %s before deleting it: %w", m.ID, err))
			return
		}
	}
	rep, err := h.o.Store.Remove(c.Request.Context(), m.ID)
	if err != nil {
		core.WriteError(c, err)
		return
	}
	c.JSON(http.StatusOK, gin.H{"id": rep.ID, "object": "model", "deleted": true, "freed_bytes": rep.Freed})
}

// PullRequest is the body of POST /v1/models/pull.
type PullRequest struct {
	Model    string      `json:"model"`              // hf:owner/repo[:QUANT] or https://…/x.gguf
	Name     string      `json:"name,omitempty"`     // model id to create
	Task     models.Task `json:"task,omitempty"`     // override the inferred task
	Variant  string      `json:"variant,omitempty"`  // ONNX variant ("quantized", "fp16", …)
	Revision string      `json:"revision,omitempty"` // hub revision
}

// pull streams models.Progress events as NDJSON, ending with
// {"status":"success","model":ID} or {"status":"error","error":{…}}.
func (h *modelHandlers) pull(c *gin.Context) {
	if h.o.Puller == nil {
		core.WriteError(c, &core.Error{Status: http.StatusServiceUnavailable, Type: "server_error", Message: "pulling is not available in this daemon"})
		return
	}
	var req PullRequest
	if err := json.NewDecoder(c.Request.Body).Decode(&req); err != nil {
		if e := core.BodyReadError(err); e != nil {
			core.WriteError(c, e)
			return
		}
		core.WriteError(c, core.BadRequest("", "invalid JSON body: %v", err))
		return
	}
	if req.Model == "" {
		core.WriteError(c, core.BadRequest("model", "model is required (hf:owner/repo[:QUANT] or an https:// URL of a .gguf file)"))
		return
	}
	// A pull refused before any network access (bad reference, name or task,
	// offline mode) is a plain HTTP error; from then on the stream has started
	// and errors end it as {"status":"error"} lines.
	opts := hub.PullOptions{Name: req.Name, Task: req.Task, Variant: req.Variant, Revision: req.Revision}
	if err := h.o.Puller.Check(req.Model, opts); err != nil {
		core.WriteError(c, err)
		return
	}
	c.Header("Content-Type", "application/x-ndjson")
	c.Header("Cache-Control", "no-store")
	c.Status(http.StatusOK)
	c.Writer.Flush()
	nd := core.NewNDJSONWriter(c.Writer)
	send := func(v any) { _ = nd.Send(v) }
	// Pull calls the progress function from its own goroutine, never after it returns.
	m, err := h.o.Puller.Pull(c.Request.Context(), req.Model, opts, func(p models.Progress) {
		if p.Status != models.StatusSuccess { // sent below with the id
			send(p)
		}
	})
	if err != nil {
		send(gin.H{"status": "error", "error": core.ToAPIError(core.AsCut(c, err))})
		return
	}
	send(gin.H{"status": models.StatusSuccess, "model": m.ID})
}
