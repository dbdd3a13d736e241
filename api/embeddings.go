package api

import (
	"context"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"math"
	"net/http"

	"github.com/gin-gonic/gin"

	"github.com/modeld/modeld/pipelines"
)

// Embedder is a loaded feature-extraction pipeline (*pipelines.Embedder).
type Embedder interface {
	Embed(ctx context.Context, texts []string, opts pipelines.EmbedOptions) (pipelines.EmbedResult, error)
	// Dimensions is the vectors' length (0 when the model does not say).
	Dimensions() int
}

var _ Embedder = (*pipelines.Embedder)(nil)

// EmbeddingRequest is OpenAI's embeddings request plus modeld's pooling,
// normalize and keep_alive.
type EmbeddingRequest struct {
	Model          string          `json:"model"`
	Input          json.RawMessage `json:"input"`
	EncodingFormat string          `json:"encoding_format"`
	Dimensions     *int            `json:"dimensions"`
	User           string          `json:"user"` // accepted and ignored
	// Pooling overrides the model's pooling: mean, cls or last_token.
	Pooling string `json:"pooling"`
	// Normalize L2-normalizes the vectors; default true, as OpenAI's are.
	Normalize *bool     `json:"normalize"`
	KeepAlive KeepAlive `json:"keep_alive"`
}

// Embedding is one vector: []float32, or a base64 string of little-endian
// float32 values with encoding_format "base64".
type Embedding struct {
	Object    string `json:"object"` // "embedding"
	Index     int    `json:"index"`
	Embedding any    `json:"embedding"`
}

// EmbeddingList is the embeddings response.
type EmbeddingList struct {
	Object string      `json:"object"` // "list"
	Data   []Embedding `json:"data"`
	Model  string      `json:"model"`
	Usage  TaskUsage   `json:"usage"`
}

// embedOptions validates the request and returns the texts and pipeline options.
func (r *EmbeddingRequest) embedOptions() ([]string, pipelines.EmbedOptions, error) {
	var errs []error
	texts, err := parseTexts("input", r.Input)
	if err != nil {
		errs = append(errs, err)
	}
	switch r.EncodingFormat {
	case "", "float", "base64":
	default:
		errs = append(errs, badRequest("encoding_format", "encoding_format %q is not one of float, base64", r.EncodingFormat))
	}
	opts := pipelines.EmbedOptions{Normalize: r.Normalize}
	if opts.Normalize == nil {
		on := true
		opts.Normalize = &on
	}
	if d := r.Dimensions; d != nil {
		if *d < 1 {
			errs = append(errs, badRequest("dimensions", "dimensions must be at least 1, got %d", *d))
		}
		opts.Dimensions = *d
	}
	if opts.Pooling, err = pipelines.ParsePooling(r.Pooling); err != nil {
		errs = append(errs, badRequest("pooling", "pooling %q is not one of mean, cls, last_token", r.Pooling))
	}
	return texts, opts, joinBadRequests(errs)
}

func (s *Server) embeddings(c *gin.Context) {
	var req EmbeddingRequest
	if err := decodeJSON(c, &req); err != nil {
		writeError(c, err)
		return
	}
	texts, opts, err := req.embedOptions()
	if err != nil {
		writeError(c, err)
		return
	}
	h, e, ok := acquireAs[Embedder](s, c, req.Model, req.KeepAlive, "embeddings")
	if !ok {
		return
	}
	defer h.Release()
	if dim := e.Dimensions(); dim > 0 && opts.Dimensions > dim {
		writeError(c, badRequest("dimensions", "dimensions %d exceeds the %d dimensions of model %q", opts.Dimensions, dim, req.Model))
		return
	}
	res, err := e.Embed(c.Request.Context(), texts, opts)
	if err != nil {
		writeError(c, err)
		return
	}
	out := EmbeddingList{Object: "list", Data: make([]Embedding, len(res.Vectors)), Model: req.Model, Usage: taskUsage(res.Tokens)}
	for i, v := range res.Vectors {
		for _, x := range v {
			if !finite(float64(x)) {
				writeError(c, nonFinite(req.Model))
				return
			}
		}
		out.Data[i] = Embedding{Object: "embedding", Index: i, Embedding: v}
		if req.EncodingFormat == "base64" {
			out.Data[i].Embedding = encodeFloats(v)
		}
	}
	setTruncated(c, res.Truncated)
	c.JSON(http.StatusOK, out)
}

// encodeFloats is OpenAI's base64 embedding: the float32 values little-endian.
func encodeFloats(v []float32) string {
	b := make([]byte, 4*len(v))
	for i, x := range v {
		binary.LittleEndian.PutUint32(b[4*i:], math.Float32bits(x))
	}
	return base64.StdEncoding.EncodeToString(b)
}
