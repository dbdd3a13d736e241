package openai

import (
	"context"
	"strings"
	"unicode/utf8"

	"github.com/gin-gonic/gin"

	"github.com/modeld/modeld/api/core"
	"github.com/modeld/modeld/backends"
	"github.com/modeld/modeld/cache"
)

// TokenizeRequest is the body of POST /v1/tokenize: a text (content, or
// input), or a conversation (messages and tools, as a chat request has
// them), of a model.
type TokenizeRequest struct {
	// ChatCompletionRequest gives model, keep_alive, messages, tools and
	// tool_choice, read as /v1/chat/completions reads them.
	ChatCompletionRequest
	Content *string `json:"content"`
	Input   *string `json:"input"`
	// AddSpecial adds the model's BOS/EOS (GGUF) or post-processor tokens
	// (ONNX); default false, as llama.cpp's server has it.
	AddSpecial *bool `json:"add_special"`
	// ParseSpecial turns the text of control tokens into those tokens;
	// default true (what /v1/completions does with its prompt).
	ParseSpecial *bool `json:"parse_special"`
	// WithPieces answers each token as {id, piece}.
	WithPieces bool `json:"with_pieces"`
	// WithPrompt adds the prompt's text to the answer (the tokens
	// detokenized, control tokens rendered): for messages, the chat
	// template's rendering that the model sees.
	WithPrompt bool `json:"with_prompt"`
}

// TokenPiece is one token of a with_pieces answer: its id and its text, a
// string when the text is valid UTF-8, else its bytes as an array.
type TokenPiece struct {
	ID    int32 `json:"id"`
	Piece any   `json:"piece"`
}

// TokenizeResponse answers /v1/tokenize: tokens are ids, or TokenPieces
// with with_pieces; count is their number.
type TokenizeResponse struct {
	Model  string `json:"model"`
	Tokens any    `json:"tokens"`
	Count  int    `json:"count"`
	// Prompt is the tokens' text, with with_prompt.
	Prompt *string `json:"prompt,omitempty"`
}

// DetokenizeRequest is the body of POST /v1/detokenize.
type DetokenizeRequest struct {
	Model     string         `json:"model"`
	Tokens    []int32        `json:"tokens"`
	KeepAlive core.KeepAlive `json:"keep_alive"`
	// RenderSpecial includes the text of control tokens; default true, as
	// llama.cpp's server has it.
	RenderSpecial *bool `json:"render_special"`
}

// DetokenizeResponse answers /v1/detokenize.
type DetokenizeResponse struct {
	Model   string `json:"model"`
	Content string `json:"content"`
}

// MaxDetokenizeTokens bounds the tokens of one /v1/detokenize request.
const MaxDetokenizeTokens = 1 << 20

func (s *openaiAPI) tokenize(c *gin.Context) {
	var req TokenizeRequest
	if err := core.DecodePromptJSON(c, &req, "content", s.ContextCap()); err != nil {
		core.WriteError(c, err)
		return
	}
	text, chat, err := req.what()
	if err != nil {
		core.WriteError(c, err)
		return
	}
	var plan *core.ChatPlan
	if chat {
		if plan, err = req.Plan(s.PlanEnv()); err != nil {
			core.WriteError(c, err)
			return
		}
		if err := s.FetchImages(c.Request.Context(), plan.Msgs, "messages"); err != nil {
			core.WriteError(c, err)
			return
		}
	}
	h, model, tok, ok := s.acquireTokenizer(c, req.Model, req.KeepAlive)
	if !ok {
		return
	}
	defer h.Release()
	ctx := c.Request.Context()
	var ids []int32
	if chat {
		var rendered bool
		ids, rendered, err = core.ChatPromptIDs(backends.WithTemplateVars(ctx, backends.ThinkingVars(req.ChatTemplateKwargs, true)), model, &plan.Gen, plan.Msgs)
		if err == nil && !rendered {
			err = core.BadRequest("messages", "model %s renders chat messages itself; it has no prompt to count", core.Quote(req.Model))
		}
	} else {
		ids, err = tok.TokenizeContext(ctx, text, boolOr(req.AddSpecial, false), boolOr(req.ParseSpecial, true))
	}
	if err != nil {
		core.WriteError(c, err)
		return
	}
	resp := TokenizeResponse{Model: req.Model, Tokens: ids, Count: len(ids)}
	if req.WithPrompt {
		text, err := tok.DetokenizeContext(ctx, ids, true)
		if err != nil {
			core.WriteError(c, err)
			return
		}
		resp.Prompt = &text
	}
	if req.WithPieces {
		texts, err := tokenPieces(ctx, tok, ids)
		if err != nil {
			core.WriteError(c, err)
			return
		}
		pieces := make([]TokenPiece, len(ids))
		for i, id := range ids {
			p := texts[i]
			pieces[i] = TokenPiece{ID: id, Piece: p}
			if !utf8.ValidString(p) {
				b := make([]int, len(p))
				for j := range len(p) {
					b[j] = int(p[j])
				}
				pieces[i].Piece = b
			}
		}
		resp.Tokens = pieces
	}
	c.JSON(200, resp)
}

// tokenPieces are the texts of ids in context, so that joining them gives
// the detokenized text: a token's piece is what it adds after the token
// before it (a SentencePiece word's leading space, which detokenizing the
// token alone drops, is kept), the first token's is its own text.
func tokenPieces(ctx context.Context, tok backends.Tokenizer, ids []int32) ([]string, error) {
	out := make([]string, len(ids))
	prev := ""
	for i, id := range ids {
		single, err := tok.DetokenizeContext(ctx, []int32{id}, true)
		if err != nil {
			return nil, err
		}
		out[i] = single
		if i > 0 {
			pair, err := tok.DetokenizeContext(ctx, []int32{ids[i-1], id}, true)
			if err != nil {
				return nil, err
			}
			if rest, ok := strings.CutPrefix(pair, prev); ok {
				out[i] = rest
			}
		}
		prev = single
	}
	return out, nil
}

// what says what the request tokenizes: a text, or (chat) its messages.
func (req *TokenizeRequest) what() (string, bool, error) {
	n := 0
	var text string
	if req.Content != nil {
		n, text = n+1, *req.Content
	}
	if req.Input != nil {
		n, text = n+1, *req.Input
	}
	if len(req.Messages) > 0 {
		n++
	}
	switch {
	case n == 0:
		return "", false, core.BadRequest("content", "send content (a text) or messages (a conversation)")
	case n > 1:
		return "", false, core.BadRequest("content", "send one of content, input and messages")
	case len(req.Messages) > 0:
		if req.AddSpecial != nil || req.ParseSpecial != nil {
			return "", false, core.BadRequest("add_special", "add_special and parse_special apply to content; a conversation is tokenized as generation sees it")
		}
		return "", true, nil
	case len(req.Tools) > 0 && string(req.Tools) != "null":
		return "", false, core.BadRequest("tools", "tools go with messages")
	}
	return text, false, nil
}

func (s *openaiAPI) detokenize(c *gin.Context) {
	var req DetokenizeRequest
	if err := core.DecodeJSON(c, &req); err != nil {
		core.WriteError(c, err)
		return
	}
	if len(req.Tokens) > MaxDetokenizeTokens {
		core.WriteError(c, core.TooMany("tokens", len(req.Tokens), MaxDetokenizeTokens, "tokens"))
		return
	}
	h, _, tok, ok := s.acquireTokenizer(c, req.Model, req.KeepAlive)
	if !ok {
		return
	}
	defer h.Release()
	if req.Tokens == nil {
		req.Tokens = []int32{}
	}
	text, err := tok.DetokenizeContext(c.Request.Context(), req.Tokens, boolOr(req.RenderSpecial, true))
	if err != nil {
		core.WriteError(c, err)
		return
	}
	c.JSON(200, DetokenizeResponse{Model: req.Model, Content: text})
}

func boolOr(p *bool, def bool) bool {
	if p == nil {
		return def
	}
	return *p
}

// acquireTokenizer acquires model id and finds its Tokenizer capability.
// When ok is false the error has been written; otherwise the caller must
// release the handle.
func (s *openaiAPI) acquireTokenizer(c *gin.Context, id string, ka core.KeepAlive) (h *cache.Handle, model backends.Model, tok backends.Tokenizer, ok bool) {
	h, err := s.Acquire(c, id, ka)
	if err != nil {
		core.WriteError(c, err)
		return nil, nil, nil, false
	}
	model = backends.Unwrap(h.Instance())
	if tok, ok = model.(backends.Tokenizer); !ok {
		h.Release()
		core.WriteError(c, core.WrongModel(id, model, "a tokenizer"))
		return nil, nil, nil, false
	}
	return h, model, tok, true
}
