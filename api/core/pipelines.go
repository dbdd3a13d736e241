package core

import (
	"encoding/json"
	"fmt"
	"math"
	"net/http"
	"slices"
	"strconv"

	"github.com/gin-gonic/gin"

	"github.com/modeld/modeld/api/accesslog"
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

func NewTaskUsage(tokens int) TaskUsage { return TaskUsage{PromptTokens: tokens, TotalTokens: tokens} }

// endpoint is what a route serves: its task in words, for refusals, and the
// store's task names of the models that serve it.
type endpoint struct {
	What  string
	tasks []string
}

var (
	EmbedEndpoint     = endpoint{"embeddings", []string{backends.TaskEmbed}}
	ClassifyEndpoint  = endpoint{"text classification", []string{backends.TaskClassify, backends.TaskZeroShot}}
	RerankEndpoint    = endpoint{"reranking", []string{backends.TaskRerank}}
	SummarizeEndpoint = endpoint{"summarization", []string{backends.TaskSummarize}}
	chatEndpoint      = endpoint{"chat or completions", []string{backends.TaskChat}}
)

// checkTask refuses, before the model is acquired (so before it is loaded
// or queued for), a model whose stored tasks do not include one that ep
// serves. It passes when Options.Tasks is unset or cannot say: acquiring
// then answers (a model not found, a wrong model found by its capabilities).
func (s *Core) checkTask(id string, ep endpoint) error {
	if s.Opt.Tasks == nil || id == "" {
		return nil
	}
	canon, err := models.ParseID(id)
	if err != nil {
		return nil
	}
	tasks, err := s.Opt.Tasks(canon.String())
	if err != nil || len(tasks) == 0 {
		return nil
	}
	for _, t := range tasks {
		if slices.Contains(ep.tasks, t) {
			return nil
		}
	}
	return WrongModelType(id, TaskServed(tasks[0]), ep.What)
}

// AcquireModel checks model id's task against ep, then finds or loads it and
// returns the handle (to release) and the backend model it holds.
func (s *Core) AcquireModel(c *gin.Context, id string, ka KeepAlive, ep endpoint) (*cache.Handle, backends.Model, error) {
	id = s.resolveModel(id)
	accesslog.NoteModel(c, id)
	if err := s.checkTask(id, ep); err != nil {
		return nil, nil, err
	}
	h, err := s.Acquire(c, id, ka)
	if err != nil {
		return nil, nil, err
	}
	return h, backends.Unwrap(h.Instance()), nil
}

// AcquireAs acquires model id and checks that its model has the capability T
// (ep names the endpoint's task in the refusal). When ok is false the error
// has been written; otherwise the caller must release the handle.
func AcquireAs[T any](s *Core, c *gin.Context, id string, ka KeepAlive, ep endpoint) (h *cache.Handle, t T, ok bool) {
	h, m, err := s.AcquireModel(c, id, ka, ep)
	if err != nil {
		WriteError(c, err)
		return nil, t, false
	}
	if t, ok = m.(T); !ok {
		h.Release()
		WriteError(c, WrongModel(id, m, ep.What))
		return nil, t, false
	}
	return h, t, true
}

// WrongModel refuses a request whose model does not serve the endpoint's task,
// naming what the model does serve and where.
func WrongModel(id string, m backends.Model, want string) *Error {
	return WrongModelType(id, servedBy(m), want)
}

func WrongModelType(id, served, want string) *Error {
	e := BadRequest("model", "model %s serves %s, not %s", Quote(id), served, want)
	e.Code = "wrong_model_type"
	return e
}

// servedBy describes the task of a loaded model and its endpoint.
func servedBy(m backends.Model) string {
	if m == nil {
		return "another task"
	}
	if t := m.Info().Task; t != "" {
		return TaskServed(t)
	}
	if _, ok := m.(backends.Generator); ok {
		return TaskServed(backends.TaskChat)
	}
	return "another task"
}

// TaskServed describes a task, in the store's names, and its endpoint.
func TaskServed(task string) string {
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
	return "the task " + Quote(task)
}

// ParseTexts reads a JSON string or array of at most limit strings (param
// names the field in errors). Every text must be non-empty. Arrays of token
// ids, which OpenAI's embeddings API also accepts, are refused: modeld
// tokenizes itself.
func ParseTexts(param string, raw json.RawMessage, limit int) ([]string, error) {
	if len(raw) == 0 || string(raw) == "null" {
		return nil, BadRequest(param, "%s is required: a string or an array of strings", param)
	}
	var one string
	if err := json.Unmarshal(raw, &one); err == nil {
		if one == "" {
			return nil, BadRequest(param, "%s is an empty string; send text to process", param)
		}
		return []string{one}, nil
	}
	var items []json.RawMessage
	if err := json.Unmarshal(raw, &items); err != nil {
		return nil, BadRequest(param, "%s must be a string or an array of strings", param)
	}
	if len(items) == 0 {
		return nil, BadRequest(param, "%s is an empty array; send at least one text", param)
	}
	if len(items) > limit {
		return nil, TooMany(param, len(items), limit, "texts")
	}
	texts := make([]string, len(items))
	var errs []error
	for i, it := range items {
		if err := json.Unmarshal(it, &texts[i]); err != nil {
			if isTokenIDs(it) {
				return nil, BadRequest(param, "%s holds token ids; modeld takes text only (it tokenizes with the model's own tokenizer): send strings", param)
			}
			errs = append(errs, BadRequest(param, "%s[%d] is not a string", param, i))
			continue
		}
		if texts[i] == "" {
			errs = append(errs, BadRequest(param, "%s[%d] is an empty string", param, i))
		}
	}
	if err := JoinBadRequests(errs); err != nil {
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

// SetTruncated reports how many inputs were cut to the model's maximum length.
func SetTruncated(c *gin.Context, n int) { c.Header(TruncatedHeader, strconv.Itoa(n)) }

// NonFinite is the 500 for a model whose output holds NaN or infinity (corrupt
// weights), which JSON cannot carry.
func NonFinite(id string) *Error {
	return &Error{Status: http.StatusInternalServerError, Type: "server_error", Code: "model_output_invalid",
		Message: fmt.Sprintf("model %s produced non-finite values (NaN or infinity); its weights may be corrupt", Quote(id))}
}

func Finite(x float64) bool { return !math.IsNaN(x) && !math.IsInf(x, 0) }
