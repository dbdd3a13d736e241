package llama

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strconv"

	"github.com/modeld/modeld/backends"
	"github.com/modeld/modeld/backends/llama/wire"
)

// The text calls of a Runner: tokenize, detokenize, pieces and the chat
// template, each one call to the runner.

// Tokenize is Model.Tokenize, in the runner.
func (r *Runner) Tokenize(text string, addSpecial, parseSpecial bool) ([]int32, error) {
	return r.TokenizeContext(context.Background(), text, addSpecial, parseSpecial)
}

// TokenizeContext is Tokenize bounded by ctx: when ctx ends the call returns
// ctx's error and the connection closes, so the runner drops the request (a
// tokenization already inside llama.cpp runs to its end, unseen).
func (r *Runner) TokenizeContext(ctx context.Context, text string, addSpecial, parseSpecial bool) ([]int32, error) {
	q := url.Values{"add_special": {strconv.FormatBool(addSpecial)}, "parse_special": {strconv.FormatBool(parseSpecial)}}
	var out wire.Tokens
	if err := r.callJSON(ctx, http.MethodPost, wire.RouteTokenize, q, []byte(text), &out); err != nil {
		return nil, err
	}
	if out.Tokens == nil {
		out.Tokens = []int32{}
	}
	return out.Tokens, nil
}

// Detokenize is Model.Detokenize, in the runner.
func (r *Runner) Detokenize(ids []int32, renderSpecial bool) (string, error) {
	return r.DetokenizeContext(context.Background(), ids, renderSpecial)
}

// DetokenizeContext is Detokenize bounded by ctx, as TokenizeContext is.
func (r *Runner) DetokenizeContext(ctx context.Context, ids []int32, renderSpecial bool) (string, error) {
	body, err := json.Marshal(wire.Tokens{Tokens: ids})
	if err != nil {
		return "", fmt.Errorf("llama: encode tokens: %w", err)
	}
	b, err := r.call(ctx, http.MethodPost, wire.RouteDetokenize, url.Values{"render_special": {strconv.FormatBool(renderSpecial)}}, body)
	return string(b), err
}

// TokenPiece is Model.TokenPiece, in the runner.
func (r *Runner) TokenPiece(id int32, renderSpecial bool) (string, error) {
	q := url.Values{"token": {strconv.FormatInt(int64(id), 10)}, "render_special": {strconv.FormatBool(renderSpecial)}}
	b, err := r.call(context.Background(), http.MethodGet, wire.RoutePiece, q, nil)
	return string(b), err
}

// ApplyChatTemplate is Model.ApplyChatTemplate, in the runner.
func (r *Runner) ApplyChatTemplate(msgs []Message, addAssistant bool) (string, error) {
	return r.ApplyChatTemplateContext(context.Background(), msgs, addAssistant)
}

// ApplyChatTemplateContext is ApplyChatTemplate bounded by ctx, as
// TokenizeContext is.
func (r *Runner) ApplyChatTemplateContext(ctx context.Context, msgs []Message, addAssistant bool) (string, error) {
	body, err := json.Marshal(wire.Template{Messages: msgs, AddAssistant: addAssistant})
	if err != nil {
		return "", fmt.Errorf("%w: messages cannot be encoded: %w", ErrInvalidRequest, err)
	}
	b, err := r.call(ctx, http.MethodPost, wire.RouteTemplate, nil, body)
	return string(b), err
}

// ChatPrompt is Model.ChatPrompt, in the runner.
func (r *Runner) ChatPrompt(msgs []Message, tools []Tool, addAssistant bool) ([]int32, error) {
	return r.ChatPromptContext(context.Background(), msgs, tools, addAssistant)
}

// ChatPromptContext is ChatPrompt bounded by ctx, as TokenizeContext is:
// the prompt generation sees for msgs and tools, message text tokenized as
// text.
func (r *Runner) ChatPromptContext(ctx context.Context, msgs []Message, tools []Tool, addAssistant bool) ([]int32, error) {
	body, err := json.Marshal(wire.ChatPrompt{Messages: msgs, Tools: tools, AddAssistant: addAssistant, Vars: backends.TemplateVars(ctx)})
	if err != nil {
		return nil, fmt.Errorf("%w: messages cannot be encoded: %w", ErrInvalidRequest, err)
	}
	var out wire.Tokens
	if err := r.callJSON(ctx, http.MethodPost, wire.RouteChatPrompt, nil, body, &out); err != nil {
		return nil, err
	}
	if out.Tokens == nil {
		out.Tokens = []int32{}
	}
	return out.Tokens, nil
}
