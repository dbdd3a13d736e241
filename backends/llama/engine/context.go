package engine

import (
	"context"

	"github.com/modeld/modeld/backends"
)

// TokenizeContext is Tokenize for a caller with a context, so that an
// in-process model and a Runner can be used alike. One call into llama.cpp
// cannot be interrupted, so a long text (chunkedMin and more) is tokenized
// in pieces with the same result, ctx checked between them
// (tokenize_chunks.go); a short one is checked before and after.
func (m *Model) TokenizeContext(ctx context.Context, text string, addSpecial, parseSpecial bool) ([]int32, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	tokenize := m.Tokenize
	if len(text) >= chunkedMin {
		tokenize = func(text string, addSpecial, parseSpecial bool) ([]int32, error) {
			return m.tokenizeChunked(ctx, text, addSpecial, parseSpecial)
		}
	}
	ids, err := tokenize(text, addSpecial, parseSpecial)
	if err == nil {
		err = ctx.Err()
	}
	if err != nil {
		return nil, err
	}
	return ids, nil
}

// ApplyChatTemplateContext is ApplyChatTemplate for a caller with a context;
// ctx is checked before the template renders and after.
func (m *Model) ApplyChatTemplateContext(ctx context.Context, msgs []Message, addAssistant bool) (string, error) {
	if err := ctx.Err(); err != nil {
		return "", err
	}
	out, err := m.ApplyChatTemplate(msgs, addAssistant)
	if err == nil {
		err = ctx.Err()
	}
	if err != nil {
		return "", err
	}
	return out, nil
}

// DetokenizeContext is Detokenize for a caller with a context; ctx is
// checked before and after.
func (m *Model) DetokenizeContext(ctx context.Context, ids []int32, renderSpecial bool) (string, error) {
	if err := ctx.Err(); err != nil {
		return "", err
	}
	out, err := m.Detokenize(ids, renderSpecial)
	if err == nil {
		err = ctx.Err()
	}
	if err != nil {
		return "", err
	}
	return out, nil
}

// ChatPromptContext is ChatPrompt for a caller with a context; ctx is
// checked before and after. The template variables ctx carries
// (backends.WithTemplateVars) go into the template's context.
func (m *Model) ChatPromptContext(ctx context.Context, msgs []Message, tools []Tool, addAssistant bool) ([]int32, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	ids, err := m.chatPrompt(ctx, msgs, tools, addAssistant, backends.TemplateVars(ctx))
	if err == nil {
		err = ctx.Err()
	}
	if err != nil {
		return nil, err
	}
	return ids, nil
}
