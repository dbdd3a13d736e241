package openai

import (
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"math"
	"net/http"
	"strconv"
	"sync"

	"github.com/gin-gonic/gin"

	"github.com/modeld/modeld/api/core"
	"github.com/modeld/modeld/backends"
)

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
	Normalize *bool          `json:"normalize"`
	KeepAlive core.KeepAlive `json:"keep_alive"`
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
	Object string         `json:"object"` // "list"
	Data   []Embedding    `json:"data"`
	Model  string         `json:"model"`
	Usage  core.TaskUsage `json:"usage"`
}

// EmbedOptions validates the request and returns the texts and pipeline options.
func (r *EmbeddingRequest) EmbedOptions() ([]string, backends.EmbedOptions, error) {
	var errs []error
	texts, err := core.ParseTexts("input", r.Input, core.MaxEmbeddingInputs)
	if err != nil {
		errs = append(errs, err)
	}
	switch r.EncodingFormat {
	case "", "float", "base64":
	default:
		errs = append(errs, core.BadRequest("encoding_format", "encoding_format %s is not one of float, base64", core.Quote(r.EncodingFormat)))
	}
	opts := backends.EmbedOptions{Normalize: r.Normalize}
	if opts.Normalize == nil {
		on := true
		opts.Normalize = &on
	}
	if d := r.Dimensions; d != nil {
		if *d < 1 {
			errs = append(errs, core.BadRequest("dimensions", "dimensions must be at least 1, got %d", *d))
		}
		opts.Dimensions = *d
	}
	if opts.Pooling, err = backends.ParsePooling(r.Pooling); err != nil {
		errs = append(errs, core.BadRequest("pooling", "pooling %s is not one of mean, cls, last_token", core.Quote(r.Pooling)))
	}
	return texts, opts, core.JoinBadRequests(errs)
}

func (s *openaiAPI) embeddings(c *gin.Context) {
	var req EmbeddingRequest
	if err := core.DecodeJSON(c, &req); err != nil {
		core.WriteError(c, err)
		return
	}
	texts, opts, err := req.EmbedOptions()
	if err != nil {
		core.WriteError(c, err)
		return
	}
	h, e, ok := core.AcquireAs[backends.Embedder](s.Core, c, req.Model, req.KeepAlive, core.EmbedEndpoint)
	if !ok {
		return
	}
	defer h.Release()
	if dim := e.Dimensions(); dim > 0 && opts.Dimensions > dim {
		core.WriteError(c, core.BadRequest("dimensions", "dimensions %d exceeds the %d dimensions of model %s", opts.Dimensions, dim, core.Quote(req.Model)))
		return
	}
	res, err := e.Embed(c.Request.Context(), texts, opts)
	if err != nil {
		core.WriteError(c, err)
		return
	}
	core.NoteTokens(c, res.Tokens, 0)
	body, ok := AppendEmbeddings(bufPool.Get().(*[]byte), req.Model, res.Vectors, req.EncodingFormat == "base64", core.NewTaskUsage(res.Tokens))
	defer func() {
		if cap(*body) <= maxPooledBuf {
			bufPool.Put(body)
		}
	}()
	if !ok {
		core.WriteError(c, core.NonFinite(req.Model))
		return
	}
	core.SetTruncated(c, res.Truncated)
	c.Data(http.StatusOK, "application/json; charset=utf-8", *body)
}

// bufPool holds response buffers: an embeddings response is about 10 bytes a
// dimension.
var bufPool = sync.Pool{New: func() any { return new([]byte) }}

// maxPooledBuf is the largest buffer kept for reuse: a rare huge response
// should not stay in memory.
const maxPooledBuf = 4 << 20

// AppendEmbeddings writes an EmbeddingList as JSON into *buf (reset first) by
// hand: reflection over every float was most of what encoding/json spent on a
// response. It reports false, leaving *buf unspecified, when a value is not
// finite (JSON has no NaN or infinity).
func AppendEmbeddings(buf *[]byte, model string, vecs [][]float32, b64 bool, u core.TaskUsage) (*[]byte, bool) {
	b := append((*buf)[:0], `{"object":"list","data":[`...)
	for i, v := range vecs {
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, `{"object":"embedding","index":`...)
		b = strconv.AppendInt(b, int64(i), 10)
		b = append(b, `,"embedding":`...)
		for _, x := range v {
			if !core.Finite(float64(x)) {
				*buf = b
				return buf, false
			}
		}
		if b64 {
			b = append(b, '"')
			b = base64.StdEncoding.AppendEncode(b, FloatBytes(v))
			b = append(b, '"')
		} else {
			b = append(b, '[')
			for j, x := range v {
				if j > 0 {
					b = append(b, ',')
				}
				b = appendFloat32(b, x)
			}
			b = append(b, ']')
		}
		b = append(b, '}')
	}
	b = append(b, `],"model":`...)
	name, _ := json.Marshal(model) // a string always marshals
	b = append(b, name...)
	b = append(b, `,"usage":{"prompt_tokens":`...)
	b = strconv.AppendInt(b, int64(u.PromptTokens), 10)
	b = append(b, `,"total_tokens":`...)
	b = strconv.AppendInt(b, int64(u.TotalTokens), 10)
	b = append(b, "}}"...)
	*buf = b
	return buf, true
}

// appendFloat32 formats x as encoding/json does: the shortest decimal that
// reads back as the same float32, with an exponent only for very small or
// large magnitudes.
func appendFloat32(b []byte, x float32) []byte {
	f := float64(x)
	format := byte('f')
	if abs := math.Abs(f); abs != 0 && (float32(abs) < 1e-6 || float32(abs) >= 1e21) {
		format = 'e'
	}
	b = strconv.AppendFloat(b, f, format, -1, 32)
	if format == 'e' {
		// e-07 -> e-7, as encoding/json writes it.
		if n := len(b); n >= 4 && b[n-4] == 'e' && b[n-3] == '-' && b[n-2] == '0' {
			b[n-2] = b[n-1]
			b = b[:n-1]
		}
	}
	return b
}

// FloatBytes is OpenAI's base64 embedding before encoding: the float32 values
// little-endian.
func FloatBytes(v []float32) []byte {
	b := make([]byte, 4*len(v))
	for i, x := range v {
		binary.LittleEndian.PutUint32(b[4*i:], math.Float32bits(x))
	}
	return b
}
