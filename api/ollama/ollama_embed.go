package ollama

import (
	"encoding/json"
	"net/http"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/modeld/modeld/api/core"
	"github.com/modeld/modeld/backends"
)

// Ollama's /api/embed and the older /api/embeddings, on the embeddings path.

// OllamaEmbedRequest is the body of POST /api/embed.
type OllamaEmbedRequest struct {
	Model      string          `json:"model"`
	Input      json.RawMessage `json:"input"`
	Truncate   *bool           `json:"truncate"`
	Dimensions *int            `json:"dimensions"`
	Options    ollamaOptions   `json:"options"`
	KeepAlive  core.KeepAlive  `json:"keep_alive"`
}

// OllamaEmbeddingsRequest is the body of the older POST /api/embeddings.
type OllamaEmbeddingsRequest struct {
	Model     string         `json:"model"`
	Prompt    string         `json:"prompt"`
	Options   ollamaOptions  `json:"options"`
	KeepAlive core.KeepAlive `json:"keep_alive"`
}

// runEmbed embeds texts with model through the embeddings path.
func (h *ollama) runEmbed(c *gin.Context, model string, ka core.KeepAlive, texts []string, opts backends.EmbedOptions) (backends.EmbedResult, time.Duration, error) {
	start := time.Now()
	hd, m, err := h.s.AcquireModel(c, model, ka, core.EmbedEndpoint)
	if err != nil {
		return backends.EmbedResult{}, 0, err
	}
	defer hd.Release()
	load := time.Since(start)
	e, ok := m.(backends.Embedder)
	if !ok {
		return backends.EmbedResult{}, 0, core.WrongModel(model, m, core.EmbedEndpoint.What)
	}
	if dim := e.Dimensions(); dim > 0 && opts.Dimensions > dim {
		return backends.EmbedResult{}, 0, core.BadRequest("dimensions", "dimensions %d exceeds the %d dimensions of model '%s'", opts.Dimensions, dim, core.Clip(model))
	}
	res, err := e.Embed(c.Request.Context(), texts, opts)
	if err != nil {
		return res, 0, err
	}
	for _, v := range res.Vectors {
		for _, x := range v {
			if !core.Finite(float64(x)) {
				return res, 0, core.NonFinite(model)
			}
		}
	}
	core.SetTruncated(c, res.Truncated)
	core.NoteTokens(c, res.Tokens, 0)
	return res, load, nil
}

func (h *ollama) embed(c *gin.Context) {
	start := time.Now()
	var req OllamaEmbedRequest
	if err := h.decode(c, &req, ""); err != nil {
		ollamaError(c, err, "")
		return
	}
	texts, err := core.ParseTexts("input", req.Input, core.MaxEmbeddingInputs)
	if err != nil {
		ollamaError(c, err, req.Model)
		return
	}
	on := true
	opts := backends.EmbedOptions{Normalize: &on}
	if d := req.Dimensions; d != nil {
		if *d < 1 {
			ollamaError(c, core.BadRequest("dimensions", "dimensions must be at least 1, got %d", *d), req.Model)
			return
		}
		opts.Dimensions = *d
	}
	h.logOptions(req.Options)
	res, load, err := h.runEmbed(c, ollamaID(req.Model), req.KeepAlive, texts, opts)
	if err == nil && req.Truncate != nil && !*req.Truncate && res.Truncated > 0 {
		err = core.BadRequest("input", "%d of the inputs exceed the model's maximum length, and truncate is false", res.Truncated)
	}
	if err != nil {
		ollamaError(c, h.taskError(err, req.Model, "embeddings"), req.Model)
		return
	}
	c.JSON(http.StatusOK, gin.H{"model": req.Model, "embeddings": res.Vectors,
		"total_duration": int64(time.Since(start)), "load_duration": int64(load), "prompt_eval_count": res.Tokens})
}

func (h *ollama) embeddings(c *gin.Context) {
	var req OllamaEmbeddingsRequest
	if err := h.decode(c, &req, ""); err != nil {
		ollamaError(c, err, "")
		return
	}
	if req.Prompt == "" {
		ollamaError(c, core.BadRequest("prompt", "prompt is empty; send text to embed"), req.Model)
		return
	}
	h.logOptions(req.Options)
	off := false // this older route's vectors are not normalized
	res, _, err := h.runEmbed(c, ollamaID(req.Model), req.KeepAlive, []string{req.Prompt}, backends.EmbedOptions{Normalize: &off})
	if err != nil {
		ollamaError(c, h.taskError(err, req.Model, "embeddings"), req.Model)
		return
	}
	c.JSON(http.StatusOK, gin.H{"embedding": res.Vectors[0]})
}

// logOptions notes options an embedding request sent; none changes a vector.
func (h *ollama) logOptions(o ollamaOptions) {
	for k := range o {
		h.s.Log.Debug("ollama: option ignored", "option", core.Clip(k))
	}
}
