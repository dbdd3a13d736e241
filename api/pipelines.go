package api

import (
	"encoding/json"
	"fmt"
	"math"
	"net/http"
	"slices"
	"strconv"

	"github.com/gin-gonic/gin"

	"github.com/modeld/modeld/backends"
	"github.com/modeld/modeld/cache"
	"github.com/modeld/modeld/models"
)

// The task pipelines' endpoints (/v1/embeddings, /v1/classify, /v1/rerank,
// /v1/summarize) share what is in this file: how a handler gets the pipeline a
// model id names (a backends.Model whose task capability a type assertion
// finds), how a wrong model is refused, and how text inputs are read.
// docs/API.md documents the request and response shapes.

// TruncatedHeader names the response header that counts the inputs cut to the
// model's maximum length (0 when none was).
const TruncatedHeader = "X-Modeld-Truncated"

// TaskUsage counts the tokens fed to a model by a task without generation.
type TaskUsage struct {
	PromptTokens int `json:"prompt_tokens"`
	TotalTokens  int `json:"total_tokens"`
}

func taskUsage(tokens int) TaskUsage { return TaskUsage{PromptTokens: tokens, TotalTokens: tokens} }

// endpoint is what a route serves: its task in words, for refusals, and the
// store's task names of the models that serve it.
type endpoint struct {
	what  string
	tasks []string
}

var (
	embedEndpoint     = endpoint{"embeddings", []string{backends.TaskEmbed}}
	classifyEndpoint  = endpoint{"text classification", []string{backends.TaskClassify, backends.TaskZeroShot}}
	rerankEndpoint    = endpoint{"reranking", []string{backends.TaskRerank}}
	summarizeEndpoint = endpoint{"summarization", []string{backends.TaskSummarize}}
	chatEndpoint      = endpoint{"chat or completions", []string{backends.TaskChat}}
)

// checkTask refuses, before the model is acquired (so before it is loaded
// or queued for), a model whose stored tasks do not include one that ep
// serves. It passes when Options.Tasks is unset or cannot say: acquiring
// then answers (a model not found, a wrong model found by its capabilities).
func (s *Core) checkTask(id string, ep endpoint) error {
	if s.opt.Tasks == nil || id == "" {
		return nil
	}
	canon, err := models.ParseID(id)
	if err != nil {
		return nil
	}
	tasks, err := s.opt.Tasks(canon.String())
	if err != nil || len(tasks) == 0 {
		return nil
	}
	for _, t := range tasks {
		if slices.Contains(ep.tasks, t) {
			return nil
		}
	}
	return wrongModelType(id, taskServed(tasks[0]), ep.what)
}

// acquireModel checks model id's task against ep, then finds or loads it and
// returns the handle (to release) and the backend model it holds.
func (s *Core) acquireModel(c *gin.Context, id string, ka KeepAlive, ep endpoint) (*cache.Handle, backends.Model, error) {
	id = s.resolveModel(id)
	noteModel(c, id)
	if err := s.checkTask(id, ep); err != nil {
		return nil, nil, err
	}
	h, err := s.acquire(c, id, ka)
	if err != nil {
		return nil, nil, err
	}
	return h, backends.Unwrap(h.Instance()), nil
}

// acquireAs acquires model id and checks that its model has the capability T
// (ep names the endpoint's task in the refusal). When ok is false the error
// has been written; otherwise the caller must release the handle.
func acquireAs[T any](s *Core, c *gin.Context, id string, ka KeepAlive, ep endpoint) (h *cache.Handle, t T, ok bool) {
	h, m, err := s.acquireModel(c, id, ka, ep)
	if err != nil {
		writeError(c, err)
		return nil, t, false
	}
	if t, ok = m.(T); !ok {
		h.Release()
		writeError(c, wrongModel(id, m, ep.what))
		return nil, t, false
	}
	return h, t, true
}

// wrongModel refuses a request whose model does not serve the endpoint's task,
// naming what the model does serve and where.
func wrongModel(id string, m backends.Model, want string) *Error {
	return wrongModelType(id, servedBy(m), want)
}

func wrongModelType(id, served, want string) *Error {
	e := badRequest("model", "model %s serves %s, not %s", quote(id), served, want)
	e.Code = "wrong_model_type"
	return e
}

// servedBy describes the task of a loaded model and its endpoint.
func servedBy(m backends.Model) string {
	if m == nil {
		return "another task"
	}
	if t := m.Info().Task; t != "" {
		return taskServed(t)
	}
	if _, ok := m.(backends.Generator); ok {
		return taskServed(backends.TaskChat)
	}
	return "another task"
}

// taskServed describes a task, in the store's names, and its endpoint.
func taskServed(task string) string {
	switch task {
	case backends.TaskChat:
		return "chat (POST /v1/chat/completions)"
	case backends.TaskEmbed:
		return "embeddings (POST /v1/embeddings)"
	case backends.TaskClassify:
		return "text classification (POST /v1/classify)"
	case backends.TaskZeroShot:
		return "zero-shot classification (POST /v1/classify with candidate_labels)"
	case backends.TaskRerank:
		return "reranking (POST /v1/rerank)"
	case backends.TaskSummarize:
		return "summarization (POST /v1/summarize)"
	}
	return "the task " + quote(task)
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
