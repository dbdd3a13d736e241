package api

import (
	"encoding/json"
	"fmt"
	"math"
	"net/http"
	"strconv"

	"github.com/gin-gonic/gin"

	"github.com/modeld/modeld/cache"
	"github.com/modeld/modeld/pipelines"
)

// The task pipelines' endpoints (/v1/embeddings, /v1/classify, /v1/rerank,
// /v1/summarize) share what is in this file: how a handler gets the pipeline a
// model id names, how a wrong model is refused, and how text inputs are read.
// docs/API.md documents the request and response shapes.

// TruncatedHeader names the response header that counts the inputs cut to the
// model's maximum length (0 when none was).
const TruncatedHeader = "X-Modeld-Truncated"

// Unwrapper is implemented by cache instances that hold a task pipeline (the
// daemon's ONNX instances); the handlers use the pipeline it returns. An instance
// without it is used as the pipeline itself.
type Unwrapper interface {
	Unwrap() pipelines.Pipeline
}

// TaskUsage counts the tokens fed to a model by a task without generation.
type TaskUsage struct {
	PromptTokens int `json:"prompt_tokens"`
	TotalTokens  int `json:"total_tokens"`
}

func taskUsage(tokens int) TaskUsage { return TaskUsage{PromptTokens: tokens, TotalTokens: tokens} }

// acquirePipeline finds or loads model id and returns the handle (to release) and
// the pipeline it holds, after setting the device header.
func (s *Server) acquirePipeline(c *gin.Context, id string, ka KeepAlive) (*cache.Handle, any, error) {
	h, err := s.acquire(c, id, ka)
	if err != nil {
		return nil, nil, err
	}
	var p any = h.Instance()
	if u, ok := p.(Unwrapper); ok {
		p = u.Unwrap()
	}
	return h, p, nil
}

// acquireAs acquires model id and checks that its pipeline is a T (what names
// the endpoint's task in the refusal). When ok is false the error has been
// written; otherwise the caller must release the handle.
func acquireAs[T any](s *Server, c *gin.Context, id string, ka KeepAlive, what string) (h *cache.Handle, t T, ok bool) {
	h, p, err := s.acquirePipeline(c, id, ka)
	if err != nil {
		writeError(c, err)
		return nil, t, false
	}
	if t, ok = p.(T); !ok {
		h.Release()
		writeError(c, wrongModel(id, p, what))
		return nil, t, false
	}
	return h, t, true
}

// wrongModel refuses a request whose model does not serve the endpoint's task,
// naming what the model does serve and where.
func wrongModel(id string, p any, want string) *Error {
	e := badRequest("model", "model %s serves %s, not %s", quote(id), servedBy(p), want)
	e.Code = "wrong_model_type"
	return e
}

// servedBy describes the task of a loaded model and its endpoint.
func servedBy(p any) string {
	if t, ok := p.(interface{ Task() pipelines.Task }); ok {
		switch t.Task() {
		case pipelines.TaskEmbed:
			return "embeddings (POST /v1/embeddings)"
		case pipelines.TaskClassify:
			return "text classification (POST /v1/classify)"
		case pipelines.TaskZeroShot:
			return "zero-shot classification (POST /v1/classify with candidate_labels)"
		case pipelines.TaskRerank:
			return "reranking (POST /v1/rerank)"
		case pipelines.TaskSummarize:
			return "summarization (POST /v1/summarize)"
		}
		return "the task " + string(t.Task())
	}
	if _, ok := p.(ChatModel); ok {
		return "chat (POST /v1/chat/completions)"
	}
	return "another task"
}

// parseTexts reads a JSON string or array of at most limit strings (param
// names the field in errors). Every text must be non-empty. Arrays of token
// ids, which OpenAI's embeddings API also accepts, are refused: modeld
// tokenizes itself.
func parseTexts(param string, raw json.RawMessage, limit int) ([]string, error) {
	if len(raw) == 0 || string(raw) == "null" {
		return nil, badRequest(param, "%s is required: a string or an array of strings", param)
	}
	var one string
	if err := json.Unmarshal(raw, &one); err == nil {
		if one == "" {
			return nil, badRequest(param, "%s is an empty string; send text to process", param)
		}
		return []string{one}, nil
	}
	var items []json.RawMessage
	if err := json.Unmarshal(raw, &items); err != nil {
		return nil, badRequest(param, "%s must be a string or an array of strings", param)
	}
	if len(items) == 0 {
		return nil, badRequest(param, "%s is an empty array; send at least one text", param)
	}
	if len(items) > limit {
		return nil, tooMany(param, len(items), limit, "texts")
	}
	texts := make([]string, len(items))
	var errs []error
	for i, it := range items {
		if err := json.Unmarshal(it, &texts[i]); err != nil {
			if isTokenIDs(it) {
				return nil, badRequest(param, "%s holds token ids; modeld takes text only (it tokenizes with the model's own tokenizer): send strings", param)
			}
			errs = append(errs, badRequest(param, "%s[%d] is not a string", param, i))
			continue
		}
		if texts[i] == "" {
			errs = append(errs, badRequest(param, "%s[%d] is an empty string", param, i))
		}
	}
	if err := joinBadRequests(errs); err != nil {
		return nil, err
	}
	return texts, nil
}

// isTokenIDs reports whether an input item is a token id or an array of them.
func isTokenIDs(item json.RawMessage) bool {
	var n int64
	if json.Unmarshal(item, &n) == nil {
		return true
	}
	var ns []int64
	return json.Unmarshal(item, &ns) == nil
}

// setTruncated reports how many inputs were cut to the model's maximum length.
func setTruncated(c *gin.Context, n int) { c.Header(TruncatedHeader, strconv.Itoa(n)) }

// nonFinite is the 500 for a model whose output holds NaN or infinity (corrupt
// weights), which JSON cannot carry.
func nonFinite(id string) *Error {
	return &Error{Status: http.StatusInternalServerError, Type: "server_error", Code: "model_output_invalid",
		Message: fmt.Sprintf("model %s produced non-finite values (NaN or infinity); its weights may be corrupt", quote(id))}
}

func finite(x float64) bool { return !math.IsNaN(x) && !math.IsInf(x, 0) }
