package api

import (
	"encoding/json"
	"fmt"
	"strings"

	"github.com/gin-gonic/gin"
	"github.com/modeld/modeld/backends"
)

// The OpenAI chat and completions handlers: their requests' plans and
// their routes.

// plan validates a chat request without a model: every field, every cap, and
// the prompt's size against the largest context a model gets.
func (req *ChatCompletionRequest) plan(env planEnv) (*chatPlan, error) {
	contextCap := env.contextCap
	maxTokens, maxParam := req.MaxCompletionTokens, "max_completion_tokens"
	if maxTokens == nil {
		maxTokens, maxParam = req.MaxTokens, "max_tokens"
	}
	gen, err := req.request(maxParam, maxTokens, contextCap)
	var errs []error
	if err != nil {
		errs = append(errs, err)
	}
	switch n := len(req.Messages); {
	case n == 0:
		errs = append(errs, badRequest("messages", "messages must not be empty"))
	case n > MaxChatMessages:
		return nil, joinBadRequests(append(errs, tooMany("messages", n, MaxChatMessages, "messages")))
	}
	msgs := make([]backends.Message, 0, len(req.Messages))
	for i, m := range req.Messages {
		if !chatRoles[m.Role] {
			errs = append(errs, badRequest(fmt.Sprintf("messages[%d].role", i), "messages[%d].role %s is not one of system, developer, user, assistant, tool", i, quote(m.Role)))
		}
		if len(m.Content.NonText) > 0 {
			errs = append(errs, badRequest(fmt.Sprintf("messages[%d].content", i), "messages[%d] has content parts of type %s; only text is supported", i, clip(strings.Join(m.Content.NonText, ", "))))
		}
		bm, err := m.message(i)
		if err != nil {
			errs = append(errs, err)
		}
		msgs = append(msgs, bm)
	}
	if err := req.tooling(&gen, env); err != nil {
		errs = append(errs, err)
	}
	if err := joinBadRequests(errs); err != nil {
		return nil, err
	}
	// chat_template_kwargs reach the template too (documents, a system
	// prompt of its own): their text counts with the messages'.
	kw := templateVarBytes(req.ChatTemplateKwargs)
	if err := checkBytes("chat_template_kwargs", "chat_template_kwargs has", kw, 0, contextCap); err != nil {
		return nil, err
	}
	return newChatPlan(gen, msgs, contextCap, convFields{conversation: "messages", tools: req.toolsParam(), extraBytes: kw})
}

func (s *openaiAPI) chatCompletions(c *gin.Context) {
	var req ChatCompletionRequest
	if err := decodePromptJSON(c, &req, "messages", s.contextCap()); err != nil {
		writeError(c, err)
		return
	}
	plan, err := req.plan(s.planEnv())
	if err != nil {
		writeError(c, err)
		return
	}
	run, err := s.startChat(c, chatCall{model: req.Model, keepAlive: req.KeepAlive, plan: plan, vars: backends.ThinkingVars(req.ChatTemplateKwargs, true), // thinking on unless the request says otherwise, as documented
		single: req.ParallelToolCalls != nil && !*req.ParallelToolCalls})
	if err != nil {
		writeError(c, err)
		return
	}
	defer run.Release()
	s.writeGeneration(c, run.Events, req.Model, req.Stream, req.StreamOptions, true, &plan.gen)
}

// completionPlan is a validated completions request.
type completionPlan struct {
	gen    backends.Request
	prompt string
}

// plan validates a completions request without a model.
func (req *CompletionRequest) plan(env planEnv) (*completionPlan, error) {
	contextCap := env.contextCap
	var errs []error
	if err := req.completionLogprobsParam(); err != nil {
		errs = append(errs, err)
	}
	gen, err := req.request("max_tokens", req.MaxTokens, contextCap)
	if err != nil {
		errs = append(errs, err)
	}
	var prompt StringOrList
	if len(req.Prompt) == 0 || json.Unmarshal(req.Prompt, &prompt) != nil {
		errs = append(errs, badRequest("prompt", "prompt must be a string (or an array holding one string)"))
	} else if len(prompt) != 1 {
		errs = append(errs, badRequest("prompt", "prompt must hold exactly one string, got %d", len(prompt)))
	} else if prompt[0] == "" {
		errs = append(errs, badRequest("prompt", "prompt is empty"))
	}
	if req.Echo {
		errs = append(errs, badRequest("echo", "echo is not supported"))
	}
	if req.Suffix != nil && *req.Suffix != "" {
		errs = append(errs, badRequest("suffix", "suffix is not supported"))
	}
	if req.BestOf != nil && *req.BestOf != 1 {
		errs = append(errs, badRequest("best_of", "only best_of=1 is supported"))
	}
	if err := responseFormat(req.ResponseFormat, &gen, openAINames, env.constraints); err != nil {
		errs = append(errs, err)
	}
	if err := joinBadRequests(errs); err != nil {
		return nil, err
	}
	if err := checkPromptBytes("prompt", len(prompt[0]), gen.MaxTokens, contextCap); err != nil {
		return nil, err
	}
	return &completionPlan{gen: gen, prompt: prompt[0]}, nil
}

func (s *openaiAPI) completions(c *gin.Context) {
	var req CompletionRequest
	if err := decodePromptJSON(c, &req, "prompt", s.contextCap()); err != nil {
		writeError(c, err)
		return
	}
	plan, err := req.plan(s.planEnv())
	if err != nil {
		writeError(c, err)
		return
	}
	run, err := s.startText(c, req.Model, req.KeepAlive, plan.gen, plan.prompt, "prompt")
	if err != nil {
		writeError(c, err)
		return
	}
	defer run.Release()
	s.writeGeneration(c, run.Events, req.Model, req.Stream, req.StreamOptions, false, &plan.gen)
}

// chunkToolCalls is the wire form of a stream's tool-call deltas.
func chunkToolCalls(deltas []backends.ToolCallDelta) []ChunkToolCall {
	out := make([]ChunkToolCall, len(deltas))
	for i, d := range deltas {
		out[i].Index, out[i].ID = d.Index, d.ID
		if d.ID != "" {
			out[i].Type = "function"
		}
		out[i].Function.Name, out[i].Function.Arguments = d.Name, d.Arguments
	}
	return out
}

func toUsage(u backends.Usage) Usage {
	return Usage{
		PromptTokens: u.PromptTokens, CompletionTokens: u.CompletionTokens,
		TotalTokens:         u.PromptTokens + u.CompletionTokens,
		PromptTokensDetails: &PromptTokensDetails{CachedTokens: u.CachedTokens},
	}
}
