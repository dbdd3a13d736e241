package responses

import (
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"sort"
	"strings"

	"github.com/gin-gonic/gin"

	"github.com/modeld/modeld/api/core"
	"github.com/modeld/modeld/backends"
)

// The OpenAI Responses dialect (POST /v1/responses): its wire types and
// their translation onto the chat core (chatcore.go). Input items become
// backends.Messages (responses_input.go), function tools and text.format the same tools and
// grammars as the chat API's, reasoning.effort the template's
// enable_thinking; the answer's events become output items
// (responses_output.go). previous_response_id reads the bounded store of
// earlier conversations (responses_store.go). Nothing here generates,
// renders or constrains: that is the core's.

// ResponsesRequest is the body of POST /v1/responses.
type ResponsesRequest struct {
	Model              string             `json:"model"`
	Input              json.RawMessage    `json:"input"`
	Instructions       *string            `json:"instructions"`
	Tools              json.RawMessage    `json:"tools"`
	ToolChoice         json.RawMessage    `json:"tool_choice"`
	ParallelToolCalls  *bool              `json:"parallel_tool_calls"`
	Text               *responsesText     `json:"text"`
	MaxOutputTokens    *int               `json:"max_output_tokens"`
	Temperature        *float64           `json:"temperature"`
	TopP               *float64           `json:"top_p"`
	Reasoning          *ResponseReasoning `json:"reasoning"`
	Stream             bool               `json:"stream"`
	Store              *bool              `json:"store"`
	PreviousResponseID string             `json:"previous_response_id"`
	Metadata           map[string]string  `json:"metadata"`
	User               string             `json:"user"`
	KeepAlive          core.KeepAlive     `json:"keep_alive"`
	// Seed is modeld's own, as on the chat API: the same seed, prompt and
	// sampling give the same answer.
	Seed *int64 `json:"seed"`
	// Speculative is modeld's own, as on the chat API: prompt-lookup
	// decoding on or off for this request; absent keeps the model's setting.
	Speculative *bool `json:"speculative"`

	// Fields whose use would change the answer in a way modeld cannot
	// honour: refused when set, naming the field.
	Background   *bool           `json:"background"`
	Conversation json.RawMessage `json:"conversation"`
	Prompt       json.RawMessage `json:"prompt"`
	TopLogprobs  *int            `json:"top_logprobs"`
	MaxToolCalls *int            `json:"max_tool_calls"`
}

// responsesFields are the request fields modeld reads (or refuses); any
// other field (include, prompt_cache_key, client_metadata, service_tier,
// truncation, safety_identifier, stream_options, ...) is ignored and
// logged at debug.
var responsesFields = map[string]bool{
	"model": true, "input": true, "instructions": true, "tools": true, "tool_choice": true, "parallel_tool_calls": true,
	"text": true, "max_output_tokens": true, "temperature": true, "top_p": true, "reasoning": true, "stream": true,
	"store": true, "previous_response_id": true, "metadata": true, "user": true, "keep_alive": true, "seed": true, "speculative": true,
	"background": true, "conversation": true, "prompt": true, "top_logprobs": true, "max_tool_calls": true,
}

type responsesText struct {
	Format    *responsesTextFormat `json:"format,omitempty"`
	Verbosity string               `json:"verbosity,omitempty"`
}

// responsesTextFormat is text.format: the Responses form of
// response_format, with the json_schema fields flat.
type responsesTextFormat struct {
	Type        string          `json:"type"`
	Name        string          `json:"name,omitempty"`
	Description string          `json:"description,omitempty"`
	Schema      json.RawMessage `json:"schema,omitempty"`
	Strict      *bool           `json:"strict,omitempty"`
}

// ResponseReasoning is the request's (and the response's) reasoning.
type ResponseReasoning struct {
	Effort  *string `json:"effort"`
	Summary *string `json:"summary"`
}

// ResponsePlan is a validated Responses request.
type ResponsePlan struct {
	Chat *core.ChatPlan
	// input are this request's input items as stored for input_items.
	input []json.RawMessage
	// History is the conversation before the output: the previous
	// response's, then this input (instructions are not part of it: they
	// apply to one response only).
	History []backends.Message
	vars    map[string]any
	single  bool
	prev    *StoredResponse
	// tools are the request's tools as the core's functions, with what
	// each model-facing name stands for and the tool types dropped.
	tools *responseTools
}

// decodeResponsesRequest reads the body and logs at debug the fields it
// ignores.
func decodeResponsesRequest(s *core.Core, c *gin.Context, req *ResponsesRequest) error {
	var raw map[string]json.RawMessage
	if err := core.DecodePromptJSON(c, &raw, "input", s.ContextCap()); err != nil {
		return err
	}
	var ignored []string
	for k := range raw {
		if !responsesFields[k] {
			ignored = append(ignored, k)
		}
	}
	if len(ignored) > 0 {
		sort.Strings(ignored)
		s.Log.Debug("responses: ignored request fields", "fields", ignored)
	}
	b, _ := json.Marshal(raw) // re-encoding decoded JSON cannot fail
	return core.UnmarshalBody(b, req)
}

// Plan validates req without a model; prev is the stored response that
// previous_response_id names (nil for none).
func (req *ResponsesRequest) Plan(prev *StoredResponse, env core.PlanEnv) (*ResponsePlan, error) {
	contextCap := env.ContextCap
	var errs []error
	add := func(err error) {
		if err != nil {
			errs = append(errs, err)
		}
	}
	sf := core.SamplingFields{Temperature: req.Temperature, TopP: req.TopP, Seed: req.Seed, Speculative: req.Speculative}
	gen, err := sf.Request("max_output_tokens", req.MaxOutputTokens, contextCap)
	add(err)
	add(req.refusals())
	p := &ResponsePlan{prev: prev}
	if prev != nil {
		p.History = slices.Clone(prev.History)
	}
	input, items, loaded, err := responseInput(req.Input)
	add(err)
	p.input = items
	p.History = append(p.History, input...)
	nameToolResults(p.History)
	p.tools, err = req.tools(&gen, loaded)
	add(err)
	if f := req.Text; f != nil && f.Format != nil {
		add(textFormat(f.Format, &gen))
	}
	// Reasoning as the dialect means it: none unless reasoning.effort asks
	// for some (reasoning absent, or without an effort, is none).
	p.vars = backends.ThinkingVars(nil, false)
	if r := req.Reasoning; r != nil && r.Effort != nil {
		switch *r.Effort {
		case "none", "minimal":
		case "low", "medium", "high", "xhigh":
			p.vars = backends.ThinkingVars(nil, true)
		default:
			add(core.BadRequest("reasoning.effort", "reasoning.effort %s is not one of none, minimal, low, medium, high, xhigh", core.Quote(*r.Effort)))
		}
	}
	add(checkMetadata(req.Metadata))
	if err := core.JoinBadRequests(errs); err != nil {
		return nil, err
	}
	p.single = req.ParallelToolCalls != nil && !*req.ParallelToolCalls || req.MaxToolCalls != nil
	gen.ToolChoice.Single = p.single
	if err := core.CompileTooling(&gen, responsesNames, env); err != nil {
		return nil, renameParam(err, "response_format", "text.format")
	}
	msgs := p.History
	if req.Instructions != nil && *req.Instructions != "" {
		msgs = append([]backends.Message{{Role: "system", Content: *req.Instructions}}, msgs...)
	}
	if len(input) == 0 {
		return nil, core.BadRequest("input", "input must not be empty")
	}
	p.Chat, err = core.NewChatPlan(gen, msgs, contextCap, core.ConvFields{Conversation: "input"})
	if err != nil {
		return nil, asInputError(err)
	}
	return p, nil
}

// renameParam is err with the chat API's field from named as the
// Responses field to (in its param and message).
func renameParam(err error, from, to string) error {
	if e, ok := err.(*core.Error); ok && e.Param != nil && *e.Param == from {
		c := *e
		c.Param = &to
		c.Message = strings.ReplaceAll(c.Message, from, to)
		return &c
	}
	return err
}

// responsesNames are the Responses API's field names.
var responsesNames = core.FieldNames{Format: "text.format", Tools: "tools", Tool: "function", Schema: "parameters"}

// asInputError names input, the Responses field of the prompt, in the
// core's errors about messages.
func asInputError(err error) error {
	return renameParam(err, "messages", "input")
}

// refusals are the 400s of fields that would change the answer.
func (req *ResponsesRequest) refusals() error {
	var errs []error
	if req.Background != nil && *req.Background {
		errs = append(errs, core.BadRequest("background", "background responses are not supported; send background false and wait for (or stream) the answer"))
	}
	if core.Given(req.Conversation) {
		errs = append(errs, core.BadRequest("conversation", "conversation objects are not supported; send the history in input, or continue with previous_response_id"))
	}
	if core.Given(req.Prompt) {
		errs = append(errs, core.BadRequest("prompt", "stored prompt templates are not supported; send instructions and input"))
	}
	if req.TopLogprobs != nil && *req.TopLogprobs > 0 {
		errs = append(errs, core.BadRequest("top_logprobs", "top_logprobs is not supported on /v1/responses; use /v1/chat/completions with logprobs"))
	}
	if n := req.MaxToolCalls; n != nil && *n != 1 {
		errs = append(errs, core.BadRequest("max_tool_calls", "max_tool_calls %d is not supported: only 1 (or leaving it out) is", *n))
	}
	return core.JoinBadRequests(errs)
}

// builtinToolsHint says that hosted tools are OpenAI's platform's, which
// modeld does not run; function and custom tools are the client's own.
const builtinToolsHint = "modeld runs no hosted tools; define a function or custom tool and run it in the client"

// tools reads tools, the tools tool_search_output items loaded, and
// tool_choice into gen.
func (req *ResponsesRequest) tools(gen *backends.Request, loaded []loadedTools) (*responseTools, error) {
	ts := &responseTools{origin: map[string]toolOrigin{}}
	var errs []error
	if core.Given(req.Tools) {
		if err := ts.readTools(req.Tools, "tools"); err != nil {
			errs = append(errs, err)
		}
	}
	for _, l := range loaded {
		if err := ts.loaded(l.tools, l.param); err != nil {
			errs = append(errs, err)
		}
	}
	if len(errs) == 0 && core.Given(req.ToolChoice) {
		if err := ts.toolChoice(req.ToolChoice, gen); err != nil {
			errs = append(errs, err)
		}
	}
	gen.Tools = ts.tools
	return ts, core.JoinBadRequests(errs)
}

// textFormat reads text.format into gen.ResponseFormat; CompileTooling
// derives its grammar, the same as response_format's.
func textFormat(f *responsesTextFormat, gen *backends.Request) error {
	switch t := backends.ResponseFormatType(f.Type); t {
	case "", backends.FormatText, backends.FormatJSONObject:
		gen.ResponseFormat = backends.ResponseFormat{Type: t}
	case backends.FormatJSONSchema:
		if !core.Given(f.Schema) {
			return core.BadRequest("text.format.schema", "text.format json_schema needs a schema")
		}
		gen.ResponseFormat = backends.ResponseFormat{Type: t, Name: f.Name, Schema: f.Schema, Strict: f.Strict != nil && *f.Strict}
	default:
		return core.BadRequest("text.format.type", "text.format type %s is not one of text, json_object, json_schema", core.Quote(f.Type))
	}
	return nil
}

// Register adds the Responses routes, with the store their
// previous_response_id reads.
func Register(s *core.Core, cfg ResponseStoreConfig) {
	h := &responsesAPI{s: s, store: NewResponseStore(cfg)}
	s.Engine.POST("/v1/responses", h.create)
	s.Engine.GET("/v1/responses/:id", h.get)
	s.Engine.DELETE("/v1/responses/:id", h.delete)
	s.Engine.GET("/v1/responses/:id/input_items", h.inputItems)
}

type responsesAPI struct {
	s     *core.Core
	store *ResponseStore
}

func (h *responsesAPI) create(c *gin.Context) {
	var req ResponsesRequest
	if err := decodeResponsesRequest(h.s, c, &req); err != nil {
		core.WriteError(c, err)
		return
	}
	var prev *StoredResponse
	if id := req.PreviousResponseID; id != "" {
		var ok bool
		if prev, ok = h.store.Get(id); !ok {
			core.WriteError(c, responseNotFound(id, "previous_response_id"))
			return
		}
	}
	plan, err := req.Plan(prev, h.s.PlanEnv())
	if err != nil {
		core.WriteError(c, err)
		return
	}
	if d := plan.tools.dropped; len(d) > 0 {
		h.s.Log.Debug("responses: dropped tools modeld cannot run (hosted or unknown types)", "types", d)
	}
	run, err := h.s.StartChat(c, core.ChatCall{Model: req.Model, KeepAlive: req.KeepAlive, Plan: plan.Chat, Vars: plan.vars, Single: plan.single})
	if err != nil {
		core.WriteError(c, asInputError(err))
		return
	}
	defer run.Release()
	w := newResponseWriter(c, &req, plan)
	resp, ok := w.write(run.Events)
	if ok && (req.Store == nil || *req.Store) {
		h.store.Put(resp, plan)
	}
}

// responseNotFound is the 404 of an id the store does not hold.
func responseNotFound(id, param string) error {
	e := &core.Error{Status: http.StatusNotFound, Type: "invalid_request_error", Code: "response_not_found",
		Message: fmt.Sprintf("no response with id %s: it was never stored (store false), was deleted, or has expired", core.Quote(id))}
	if param != "" {
		e.Param = &param
	}
	return e
}

func (h *responsesAPI) get(c *gin.Context) {
	r, ok := h.store.Get(c.Param("id"))
	if !ok {
		core.WriteError(c, responseNotFound(c.Param("id"), ""))
		return
	}
	c.Data(http.StatusOK, "application/json; charset=utf-8", r.object)
}

func (h *responsesAPI) delete(c *gin.Context) {
	id := c.Param("id")
	if !h.store.Delete(id) {
		core.WriteError(c, responseNotFound(id, ""))
		return
	}
	c.JSON(http.StatusOK, gin.H{"id": id, "object": "response", "deleted": true})
}

// inputItems lists a stored response's input items: newest first unless
// order=asc, as OpenAI's endpoint does (no paging: a response's items are
// few).
func (h *responsesAPI) inputItems(c *gin.Context) {
	r, ok := h.store.Get(c.Param("id"))
	if !ok {
		core.WriteError(c, responseNotFound(c.Param("id"), ""))
		return
	}
	items := slices.Clone(r.input)
	switch order := c.DefaultQuery("order", "desc"); order {
	case "desc":
		slices.Reverse(items)
	case "asc":
	default:
		core.WriteError(c, core.BadRequest("order", "order %s is not asc or desc", core.Quote(order)))
		return
	}
	first, last := "", ""
	if len(items) > 0 {
		first, last = itemID(items[0]), itemID(items[len(items)-1])
	}
	c.JSON(http.StatusOK, gin.H{"object": "list", "data": items, "first_id": first, "last_id": last, "has_more": false})
}

func itemID(raw json.RawMessage) string {
	var v struct {
		ID string `json:"id"`
	}
	_ = json.Unmarshal(raw, &v)
	return v.ID
}
