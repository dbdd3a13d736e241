package ollama

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"reflect"
	"strings"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/modeld/modeld/api/core"
	"github.com/modeld/modeld/backends"
	"github.com/modeld/modeld/cache"
	"github.com/modeld/modeld/models"
)

// Ollama's API (/api/...) on the same port as the OpenAI one. Like every
// dialect it is a translation: a request becomes the internal request model
// and runs through the chat core (chatcore.go), the embeddings path or the
// store; the events become Ollama's NDJSON objects. Nothing here generates,
// renders templates or compiles grammars. docs/API.md ("Ollama API") says
// what is supported and what is refused.

// Register adds Ollama's routes. o gives the store routes (tags, show,
// pull, delete, copy) their store and puller.
func Register(s *core.Core, o core.ModelsOptions) {
	h := &ollama{s: s, o: o}
	s.ErrorShapeOn(func(p string) bool { return strings.HasPrefix(p, "/api/") }, ollamaShape)
	s.Engine.POST("/api/chat", h.chat)
	s.Engine.POST("/api/generate", h.generate)
	s.Engine.POST("/api/embed", h.embed)
	s.Engine.POST("/api/embeddings", h.embeddings)
	s.Engine.GET("/api/tags", h.tags)
	s.Engine.POST("/api/show", h.show)
	s.Engine.GET("/api/ps", h.ps)
	s.Engine.POST("/api/pull", h.pull)
	s.Engine.DELETE("/api/delete", h.remove)
	s.Engine.POST("/api/copy", h.copy)
	s.Engine.GET("/api/version", h.version)
	s.Engine.HEAD("/api/version", h.version)
}

type ollama struct {
	s *core.Core
	o core.ModelsOptions
}

// ollamaError writes err in Ollama's shape, {"error": "..."}, with the one
// mapping's status and Retry-After. A model the store does not hold is
// Ollama's "model 'x' not found" (model is the name the client sent).
func ollamaError(c *gin.Context, err error, model string) {
	core.WriteErrorAs(c, err, func(e *core.Error) any {
		msg := e.Message
		if e.Status == http.StatusNotFound && model != "" && errors.Is(err, models.ErrNotFound) {
			msg = fmt.Sprintf("model '%s' not found", core.Clip(model))
		}
		return gin.H{"error": msg}
	})
}

// taskError says a refusal of the model's task (the one check before any
// load, or the loaded model's capabilities) as Ollama does, in the terms of
// the route asked (verb: chat, generate, embeddings), and names the route
// that serves the model: "\"all-minilm\" does not support chat; it serves
// embeddings: use POST /api/embed". The status and code stay the check's.
// Any other error is returned as it is.
func (h *ollama) taskError(err error, name, verb string) error {
	var ae *core.Error
	if !errors.As(err, &ae) || ae.Code != core.WrongModelType("", "", "").Code {
		return err
	}
	e := *ae
	e.Message = fmt.Sprintf("%q does not support %s", core.Clip(name), verb)
	if served := h.serves(name); served != "" {
		e.Message += "; it serves " + served
	}
	return &e
}

// serves names the task of a stored model and the route that serves it,
// Ollama's where it has one; "" when the store cannot say.
func (h *ollama) serves(name string) string {
	if h.o.Store == nil {
		return ""
	}
	canon, err := models.ParseID(ollamaID(name))
	if err != nil {
		return ""
	}
	m, err := h.o.Store.Get(canon.String())
	if err != nil || len(m.Tasks) == 0 {
		return ""
	}
	switch t := string(m.Tasks[0]); t {
	case backends.TaskChat:
		return "chat: use POST /api/chat or /api/generate"
	case backends.TaskEmbed:
		return "embeddings: use POST /api/embed"
	default:
		return core.TaskServed(t)
	}
}

// ollamaShape is an API error in Ollama's shape, {"error": "..."}.
func ollamaShape(e *core.Error) any { return gin.H{"error": e.Message} }

// ollamaOptions is a request's options object: the sampling fields modeld
// honours are read (and checked as the OpenAI fields are); the others
// (num_gpu, mirostat, ...) are logged at debug and ignored.
type ollamaOptions map[string]json.RawMessage

// ollamaSampling is what options gives the internal request.
type ollamaSampling struct {
	fields    core.SamplingFields
	maxTokens *int
	lastN     *int
}

func (o ollamaOptions) read(h *ollama) (ollamaSampling, error) {
	var out ollamaSampling
	f := &out.fields
	var errs []error
	into := func(k string, v any, want string) {
		if err := json.Unmarshal(o[k], v); err != nil {
			errs = append(errs, core.BadRequest("options."+k, "options.%s must be %s", k, want))
		}
	}
	for k, raw := range o {
		if string(raw) == "null" {
			continue
		}
		switch k {
		case "temperature":
			into(k, &f.Temperature, "a number")
		case "top_p":
			into(k, &f.TopP, "a number")
		case "top_k":
			into(k, &f.TopK, "an integer")
		case "min_p":
			into(k, &f.MinP, "a number")
		case "seed":
			into(k, &f.Seed, "an integer")
		case "speculative": // modeld's own: prompt-lookup decoding
			into(k, &f.Speculative, "a boolean")
		case "stop":
			into(k, &f.Stop, "a string or an array of strings")
		case "repeat_penalty":
			into(k, &f.RepeatPenalty, "a number")
		case "presence_penalty":
			into(k, &f.PresencePenalty, "a number")
		case "frequency_penalty":
			into(k, &f.FrequencyPenalty, "a number")
		case "num_predict":
			var n int
			into(k, &n, "an integer")
			if n > 0 { // -1 (and -2, 0): no limit but the context
				out.maxTokens = &n
			}
		case "repeat_last_n":
			var n int
			into(k, &n, "an integer")
			if n < -1 {
				errs = append(errs, core.BadRequest("options.repeat_last_n", "options.repeat_last_n %d is below -1", n))
			}
			out.lastN = &n
		case "num_ctx":
			var n int
			into(k, &n, "an integer")
			h.s.Log.Debug("ollama: num_ctx is the daemon's --context-size; the request's is not used", "num_ctx", n)
		default:
			h.s.Log.Debug("ollama: option ignored", "option", core.Clip(k))
		}
	}
	return out, core.JoinBadRequests(errs)
}

// Request is the internal request of the sampling options and format.
func (o ollamaSampling) request(s *core.Core, format json.RawMessage) (backends.Request, error) {
	gen, err := o.fields.Request("options.num_predict", o.maxTokens, s.ContextCap())
	if err != nil {
		return gen, err
	}
	if n := o.lastN; n != nil {
		switch {
		case *n == 0: // Ollama: 0 turns the repetition penalties off
			gen.Sampling.RepeatPenalty, gen.Sampling.PresencePenalty, gen.Sampling.FrequencyPenalty = 0, 0, 0
		case *n > 0:
			gen.Sampling.PenaltyLastN = *n
		}
	}
	if err := ollamaFormat(format, &gen); err != nil {
		return gen, err
	}
	return gen, nil
}

// ollamaFormat reads format: "json", a JSON Schema object, or nothing.
func ollamaFormat(raw json.RawMessage, gen *backends.Request) error {
	if !core.Given(raw) {
		return nil
	}
	var s string
	if json.Unmarshal(raw, &s) == nil {
		switch s {
		case "":
			return nil
		case "json":
			gen.ResponseFormat = backends.ResponseFormat{Type: backends.FormatJSONObject}
			return nil
		}
		return core.BadRequest("format", "format %s is not \"json\" or a JSON Schema object", core.Quote(s))
	}
	var obj map[string]json.RawMessage
	if json.Unmarshal(raw, &obj) != nil {
		return core.BadRequest("format", "format must be \"json\" or a JSON Schema object")
	}
	gen.ResponseFormat = backends.ResponseFormat{Type: backends.FormatJSONSchema, Name: "format", Schema: raw, Strict: true}
	return nil
}

// ollamaThink reads think: true or false (the template variable
// enable_thinking, as chat_template_kwargs sets it), or an effort level
// ("low", "medium", "high") for templates that take reasoning_effort.
// Absent, thinking is on, as Ollama thinks by default on a model that can.
func ollamaThink(raw json.RawMessage) (map[string]any, error) {
	if !core.Given(raw) {
		return backends.ThinkingVars(nil, true), nil
	}
	var b bool
	if json.Unmarshal(raw, &b) == nil {
		return backends.ThinkingVars(nil, b), nil
	}
	var level string
	if json.Unmarshal(raw, &level) == nil {
		switch level {
		case "low", "medium", "high":
			return backends.ThinkingVars(map[string]any{"reasoning_effort": level}, true), nil
		}
	}
	return nil, core.BadRequest("think", "think must be true, false, \"low\", \"medium\" or \"high\"")
}

// ollamaToolCall is a tool call as Ollama writes it: arguments are a JSON
// object, not a string.
type ollamaToolCall struct {
	Function struct {
		Index     int             `json:"index,omitempty"`
		Name      string          `json:"name"`
		Arguments json.RawMessage `json:"arguments"`
	} `json:"function"`
}

// ollamaArguments is a call's arguments as JSON: the generated text when it
// is a JSON object (it is whenever the call was grammar-constrained), else
// the text as a JSON string, so nothing the model wrote is lost.
func ollamaArguments(text string) json.RawMessage {
	t := strings.TrimSpace(text)
	if t == "" {
		return json.RawMessage(`{}`)
	}
	if strings.HasPrefix(t, "{") && json.Valid([]byte(t)) {
		return json.RawMessage(t)
	}
	b, _ := json.Marshal(text)
	return b
}

// ollamaCalls are a turn's calls in Ollama's shape (nil for none).
func ollamaCalls(calls []backends.ToolCall) []ollamaToolCall {
	if len(calls) == 0 {
		return nil
	}
	out := make([]ollamaToolCall, len(calls))
	for i, tc := range calls {
		out[i].Function.Index, out[i].Function.Name, out[i].Function.Arguments = i, tc.Name, ollamaArguments(tc.Arguments)
	}
	return out
}

// ollamaStats are the counts and durations (nanoseconds) of a final object.
type ollamaStats struct {
	TotalDuration      int64 `json:"total_duration"`
	LoadDuration       int64 `json:"load_duration"`
	PromptEvalCount    int   `json:"prompt_eval_count"`
	PromptEvalDuration int64 `json:"prompt_eval_duration"`
	EvalCount          int   `json:"eval_count"`
	EvalDuration       int64 `json:"eval_duration"`
}

// ollamaFinal is how a generation ended.
type ollamaFinal struct {
	reason string
	stats  ollamaStats
}

// ollamaDoneReason is Ollama's done_reason of a finish: it says "stop" for
// a turn that called tools.
func ollamaDoneReason(f backends.FinishReason) string {
	switch f {
	case backends.FinishLength:
		return "length"
	default:
		return "stop"
	}
}

// ollamaFrame builds one response object: a delta (final nil) or the last
// object, which carries the whole text when not streamed.
type ollamaFrame func(text, thinking string, calls []ollamaToolCall, final *ollamaFinal) any

// ollamaTiming is when a request started and how long acquiring its model
// (and preparing its prompt) took.
type ollamaTiming struct {
	start time.Time
	load  time.Duration
}

// writeRun writes a started generation: NDJSON deltas and a final object
// when streamed, else one object. Tool calls come whole (Ollama streams no
// argument deltas), in an object before the final one.
func (h *ollama) writeRun(c *gin.Context, run *core.ChatRun, model string, stream bool, tm ollamaTiming, frame ollamaFrame) {
	e := &ollamaEncoder{c: c, model: model, tm: tm, frame: frame, genStart: time.Now()}
	if stream {
		c.Header("Content-Type", "application/x-ndjson")
		c.Status(http.StatusOK)
		e.nd = core.NewNDJSONWriter(c.Writer)
	}
	core.StreamEvents(c.Request.Context(), run.Events, 1, e)
}

// ollamaEncoder encodes a generation in Ollama's shape: NDJSON frames when
// nd is set, else the whole text in one object at the finish.
type ollamaEncoder struct {
	c               *gin.Context
	model           string
	tm              ollamaTiming
	frame           ollamaFrame
	nd              *core.NdjsonWriter
	text, thinking  strings.Builder
	calls           []core.WireToolCall
	genStart, first time.Time
}

func (e *ollamaEncoder) Delta(ev backends.Event) {
	if e.first.IsZero() {
		e.first = time.Now()
	}
	e.calls = core.AddToolDeltas(e.calls, ev.ToolCalls)
	switch {
	case e.nd != nil && (ev.Text != "" || ev.Reasoning != ""):
		_ = e.nd.Send(e.frame(ev.Text, ev.Reasoning, nil, nil)) // a client that left: its context ends the generation
	case e.nd == nil:
		e.text.WriteString(ev.Text)
		e.thinking.WriteString(ev.Reasoning)
	}
}

func (e *ollamaEncoder) Finish(ev backends.Event) {
	end := time.Now()
	fin := &ollamaFinal{reason: ollamaDoneReason(ev.Finish), stats: ollamaStats{
		TotalDuration: int64(end.Sub(e.tm.start)), LoadDuration: int64(e.tm.load),
		PromptEvalCount: ev.Usage.PromptTokens, PromptEvalDuration: int64(e.first.Sub(e.genStart)),
		EvalCount: ev.Usage.CompletionTokens, EvalDuration: int64(end.Sub(e.first)),
	}}
	made := make([]backends.ToolCall, len(e.calls))
	for i, w := range e.calls {
		made[i] = backends.ToolCall{Name: w.Function.Name, Arguments: w.Function.Arguments}
	}
	tcs := ollamaCalls(made)
	if e.nd == nil {
		e.c.JSON(http.StatusOK, e.frame(e.text.String(), e.thinking.String(), tcs, fin))
		return
	}
	if len(tcs) > 0 {
		_ = e.nd.Send(e.frame("", "", tcs, nil))
	}
	_ = e.nd.Send(e.frame("", "", nil, fin))
}

func (e *ollamaEncoder) Fail(err error) {
	if e.nd != nil {
		_ = e.nd.Send(gin.H{"error": core.ToAPIError(err).Message})
		return
	}
	ollamaError(e.c, err, e.model)
}

func (e *ollamaEncoder) End() {}

// decode reads a request body into v, a pointer to a request struct, and
// logs at debug the fields v does not have: a field this dialect does not
// use is ignored harmlessly. A body that carries a chat prompt (param names
// it; "" for none) is bounded by the largest prompt a context holds.
func (h *ollama) decode(c *gin.Context, v any, param string) error {
	var raw json.RawMessage
	var err error
	if param != "" {
		err = core.DecodePromptJSON(c, &raw, param, h.s.ContextCap())
	} else {
		err = core.DecodeJSON(c, &raw)
	}
	if err != nil {
		return err
	}
	if err := core.UnmarshalBody(raw, v); err != nil {
		return err
	}
	var fields map[string]json.RawMessage
	if json.Unmarshal(raw, &fields) != nil {
		return nil
	}
	known := jsonFields(reflect.TypeOf(v).Elem())
	for k := range fields {
		if !known[k] {
			h.s.Log.Debug("ollama: field ignored", "path", c.Request.URL.Path, "field", core.Clip(k))
		}
	}
	return nil
}

// jsonFields are the JSON names of a struct type's fields.
func jsonFields(t reflect.Type) map[string]bool {
	out := map[string]bool{}
	for i := range t.NumField() {
		name, _, _ := strings.Cut(t.Field(i).Tag.Get("json"), ",")
		if name != "" && name != "-" {
			out[name] = true
		}
	}
	return out
}

// ollamaID is the modeld id of an Ollama model name: Ollama matches names
// without regard to case, and modeld ids are lowercase.
func ollamaID(name string) string { return strings.ToLower(name) }

// streamOf is Ollama's stream flag: true unless false is sent.
func streamOf(b *bool) bool { return b == nil || *b }

// loadOrUnload answers a chat or generate request that carries no input:
// with keep_alive 0 it unloads the model, else it loads it (done_reason
// "load" or "unload").
func (h *ollama) loadOrUnload(c *gin.Context, model string, ka core.KeepAlive) (string, error) {
	if ka.D != nil && *ka.D == 0 {
		if model == "" {
			return "", core.BadRequest("model", "model is required")
		}
		canon, err := models.ParseID(model)
		if err != nil {
			return "", err
		}
		if h.o.Store != nil {
			if _, err := h.o.Store.Get(canon.String()); err != nil {
				return "", err
			}
		}
		if h.s.Opt.Cache == nil {
			return "unload", nil
		}
		if err := h.s.Opt.Cache.Unload(c.Request.Context(), canon.String(), true); err != nil && !errors.Is(err, cache.ErrNotLoaded) {
			return "", err
		}
		return "unload", nil
	}
	hd, _, err := h.s.AcquireChat(c, model, ka)
	if err != nil {
		return "", err
	}
	hd.Release()
	return "load", nil
}
