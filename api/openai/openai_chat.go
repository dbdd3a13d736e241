package openai

import (
	"encoding/json"
	"fmt"
	"strings"

	"github.com/gin-gonic/gin"
	"github.com/modeld/modeld/api/core"
	"github.com/modeld/modeld/backends"
)

// The OpenAI chat and completions handlers: their requests' plans and
// their routes.

// Plan validates a chat request without a model: every field, every cap, and
// the prompt's size against the largest context a model gets.
func (req *ChatCompletionRequest) Plan(env core.PlanEnv) (*core.ChatPlan, error) {
	contextCap := env.ContextCap
	maxTokens, maxParam := req.MaxCompletionTokens, "max_completion_tokens"
	if maxTokens == nil {
		maxTokens, maxParam = req.MaxTokens, "max_tokens"
	}
	gen, err := req.Request(maxParam, maxTokens, contextCap)
	var errs []error
	if err != nil {
		errs = append(errs, err)
	}
	switch n := len(req.Messages); {
	case n == 0:
		errs = append(errs, core.BadRequest("messages", "messages must not be empty"))
	case n > core.MaxChatMessages:
		return nil, core.JoinBadRequests(append(errs, core.TooMany("messages", n, core.MaxChatMessages, "messages")))
	}
	msgs := make([]backends.Message, 0, len(req.Messages))
	for i, m := range req.Messages {
		if !core.ChatRoles[m.Role] {
			errs = append(errs, core.BadRequest(fmt.Sprintf("messages[%d].role", i), "messages[%d].role %s is not one of system, developer, user, assistant, tool", i, core.Quote(m.Role)))
		}
		if len(m.Content.NonText) > 0 {
			errs = append(errs, core.BadRequest(fmt.Sprintf("messages[%d].content", i), "messages[%d] has content parts of type %s; only text is supported", i, core.Clip(strings.Join(m.Content.NonText, ", "))))
		}
		bm, err := m.message(i)
		if err != nil {
			errs = append(errs, err)
		}
		msgs = append(msgs, bm)
	}
	if err := req.Tooling(&gen, env); err != nil {
		errs = append(errs, err)
	}
	if err := core.JoinBadRequests(errs); err != nil {
		return nil, err
	}
	// chat_template_kwargs reach the template too (documents, a system
	// prompt of its own): their text counts with the messages'.
	kw := core.TemplateVarBytes(req.ChatTemplateKwargs)
	if err := core.CheckBytes("chat_template_kwargs", "chat_template_kwargs has", kw, 0, contextCap); err != nil {
		return nil, err
	}
	return core.NewChatPlan(gen, msgs, contextCap, core.ConvFields{Conversation: "messages", Tools: req.toolsParam(), ExtraBytes: kw})
}

func (s *openaiAPI) chatCompletions(c *gin.Context) {
	var req ChatCompletionRequest
	if err := core.DecodePromptJSON(c, &req, "messages", s.ContextCap()); err != nil {
		core.WriteError(c, err)
		return
	}
	plan, err := req.Plan(s.PlanEnv())
	if err != nil {
		core.WriteError(c, err)
		return
	}
	run, err := s.StartChat(c, core.ChatCall{Model: req.Model, KeepAlive: req.KeepAlive, Plan: plan, Vars: backends.ThinkingVars(req.ChatTemplateKwargs, true), // thinking on unless the request says otherwise, as documented
		Single: req.ParallelToolCalls != nil && !*req.ParallelToolCalls})
	if err != nil {
		core.WriteError(c, err)
		return
	}
	defer run.Release()
	s.writeGeneration(c, run.Events, req.Model, req.Stream, req.StreamOptions, true, &plan.Gen)
}

// completionPlan is a validated completions request.
type completionPlan struct {
	gen    backends.Request
	prompt string
}

// Plan validates a completions request without a model.
func (req *CompletionRequest) Plan(env core.PlanEnv) (*completionPlan, error) {
	contextCap := env.ContextCap
	var errs []error
	if err := req.CompletionLogprobsParam(); err != nil {
		errs = append(errs, err)
	}
	gen, err := req.Request("max_tokens", req.MaxTokens, contextCap)
	if err != nil {
		errs = append(errs, err)
	}
	var prompt core.StringOrList
	if len(req.Prompt) == 0 || json.Unmarshal(req.Prompt, &prompt) != nil {
		errs = append(errs, core.BadRequest("prompt", "prompt must be a string (or an array holding one string)"))
	} else if len(prompt) != 1 {
		errs = append(errs, core.BadRequest("prompt", "prompt must hold exactly one string, got %d", len(prompt)))
	} else if prompt[0] == "" {
		errs = append(errs, core.BadRequest("prompt", "prompt is empty"))
	}
	if req.Echo {
		errs = append(errs, core.BadRequest("echo", "echo is not supported"))
	}
	if req.Suffix != nil && *req.Suffix != "" {
		errs = append(errs, core.BadRequest("suffix", "suffix is not supported"))
	}
	if req.BestOf != nil && *req.BestOf != 1 {
		errs = append(errs, core.BadRequest("best_of", "only best_of=1 is supported"))
	}
	if err := core.ResponseFormat(req.ResponseFormat, &gen, core.OpenAINames, env.Constraints); err != nil {
		errs = append(errs, err)
	}
	if err := core.JoinBadRequests(errs); err != nil {
		return nil, err
	}
	if err := core.CheckPromptBytes("prompt", len(prompt[0]), gen.MaxTokens, contextCap); err != nil {
		return nil, err
	}
	return &completionPlan{gen: gen, prompt: prompt[0]}, nil
}

func (s *openaiAPI) completions(c *gin.Context) {
	var req CompletionRequest
	if err := core.DecodePromptJSON(c, &req, "prompt", s.ContextCap()); err != nil {
		core.WriteError(c, err)
		return
	}
	plan, err := req.Plan(s.PlanEnv())
	if err != nil {
		core.WriteError(c, err)
		return
	}
	run, err := s.StartText(c, req.Model, req.KeepAlive, plan.gen, plan.prompt, "prompt")
	if err != nil {
		core.WriteError(c, err)
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

func toUsage(u backends.Usage) core.Usage {
	return core.Usage{
		PromptTokens: u.PromptTokens, CompletionTokens: u.CompletionTokens,
		TotalTokens:         u.PromptTokens + u.CompletionTokens,
		PromptTokensDetails: &core.PromptTokensDetails{CachedTokens: u.CachedTokens},
	}
}
