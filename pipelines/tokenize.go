package pipelines

import (
	"context"
	"strconv"

	"github.com/modeld/modeld/backends"
	"github.com/modeld/modeld/pipelines/tokenizer"
)

// textTokenizer gives every pipeline the backends.Tokenizer capability over
// its tokenizer.json: the same tokenizer its task runs. Added tokens typed
// in the text are always parsed (as the tokenizer does for the task), so
// parseSpecial false is refused; there is no chat template.
type textTokenizer struct{ files *modelFiles }

// TokenizeContext turns text into ids; addSpecial adds the post-processor's
// special tokens ([CLS]/[SEP], <s>...), as the task's input has them. No
// truncation: the count is the text's whole length.
func (t textTokenizer) TokenizeContext(ctx context.Context, text string, addSpecial, parseSpecial bool) ([]int32, error) {
	if !parseSpecial {
		return nil, &backends.BadRequestError{Param: "parse_special", Message: "this model's tokenizer always parses the special tokens typed in the text; parse_special false is not supported"}
	}
	var opts []tokenizer.Option
	if !addSpecial {
		opts = append(opts, tokenizer.WithoutSpecialTokens())
	}
	enc, err := t.files.tok.EncodeContext(ctx, text, opts...)
	if err != nil {
		return nil, err
	}
	out := make([]int32, len(enc.IDs))
	for i, id := range enc.IDs {
		out[i] = int32(id)
	}
	return out, nil
}

// DetokenizeContext turns ids back into text; without renderSpecial the
// special tokens are left out. Ids outside the vocabulary are refused.
func (t textTokenizer) DetokenizeContext(ctx context.Context, ids []int32, renderSpecial bool) (string, error) {
	if err := ctx.Err(); err != nil {
		return "", err
	}
	n := t.files.tok.VocabSize()
	in := make([]int64, len(ids))
	for i, id := range ids {
		if id < 0 || int(id) >= n {
			return "", &backends.BadRequestError{Param: "tokens", Message: "token " + strconv.Itoa(int(id)) + " is outside the vocabulary of " + strconv.Itoa(n)}
		}
		in[i] = int64(id)
	}
	return t.files.tok.Decode(in, !renderSpecial), nil
}

// ApplyChatTemplateContext: the pipelines have no chat template.
func (textTokenizer) ApplyChatTemplateContext(context.Context, []backends.Message, bool) (string, error) {
	return "", backends.ErrNoChatTemplate
}

// The Tokenizer capability of each pipeline.

// TokenizeContext is backends.Tokenizer's, over the model's tokenizer.
func (e *Embedder) TokenizeContext(ctx context.Context, text string, addSpecial, parseSpecial bool) ([]int32, error) {
	return textTokenizer{e.enc.files}.TokenizeContext(ctx, text, addSpecial, parseSpecial)
}

// DetokenizeContext is backends.Tokenizer's, over the model's tokenizer.
func (e *Embedder) DetokenizeContext(ctx context.Context, ids []int32, renderSpecial bool) (string, error) {
	return textTokenizer{e.enc.files}.DetokenizeContext(ctx, ids, renderSpecial)
}

// ApplyChatTemplateContext gives ErrNoChatTemplate.
func (e *Embedder) ApplyChatTemplateContext(ctx context.Context, msgs []backends.Message, a bool) (string, error) {
	return textTokenizer{e.enc.files}.ApplyChatTemplateContext(ctx, msgs, a)
}

// TokenizeContext is backends.Tokenizer's, over the model's tokenizer.
func (c *Classifier) TokenizeContext(ctx context.Context, text string, addSpecial, parseSpecial bool) ([]int32, error) {
	return textTokenizer{c.enc.files}.TokenizeContext(ctx, text, addSpecial, parseSpecial)
}

// DetokenizeContext is backends.Tokenizer's, over the model's tokenizer.
func (c *Classifier) DetokenizeContext(ctx context.Context, ids []int32, renderSpecial bool) (string, error) {
	return textTokenizer{c.enc.files}.DetokenizeContext(ctx, ids, renderSpecial)
}

// ApplyChatTemplateContext gives ErrNoChatTemplate.
func (c *Classifier) ApplyChatTemplateContext(ctx context.Context, msgs []backends.Message, a bool) (string, error) {
	return textTokenizer{c.enc.files}.ApplyChatTemplateContext(ctx, msgs, a)
}

// TokenizeContext is backends.Tokenizer's, over the model's tokenizer.
func (z *ZeroShot) TokenizeContext(ctx context.Context, text string, addSpecial, parseSpecial bool) ([]int32, error) {
	return z.c.TokenizeContext(ctx, text, addSpecial, parseSpecial)
}

// DetokenizeContext is backends.Tokenizer's, over the model's tokenizer.
func (z *ZeroShot) DetokenizeContext(ctx context.Context, ids []int32, renderSpecial bool) (string, error) {
	return z.c.DetokenizeContext(ctx, ids, renderSpecial)
}

// ApplyChatTemplateContext gives ErrNoChatTemplate.
func (z *ZeroShot) ApplyChatTemplateContext(ctx context.Context, msgs []backends.Message, a bool) (string, error) {
	return z.c.ApplyChatTemplateContext(ctx, msgs, a)
}

// TokenizeContext is backends.Tokenizer's, over the model's tokenizer.
func (r *Reranker) TokenizeContext(ctx context.Context, text string, addSpecial, parseSpecial bool) ([]int32, error) {
	return r.c.TokenizeContext(ctx, text, addSpecial, parseSpecial)
}

// DetokenizeContext is backends.Tokenizer's, over the model's tokenizer.
func (r *Reranker) DetokenizeContext(ctx context.Context, ids []int32, renderSpecial bool) (string, error) {
	return r.c.DetokenizeContext(ctx, ids, renderSpecial)
}

// ApplyChatTemplateContext gives ErrNoChatTemplate.
func (r *Reranker) ApplyChatTemplateContext(ctx context.Context, msgs []backends.Message, a bool) (string, error) {
	return r.c.ApplyChatTemplateContext(ctx, msgs, a)
}

// TokenizeContext is backends.Tokenizer's, over the model's tokenizer.
func (s *Summarizer) TokenizeContext(ctx context.Context, text string, addSpecial, parseSpecial bool) ([]int32, error) {
	return textTokenizer{s.m.files}.TokenizeContext(ctx, text, addSpecial, parseSpecial)
}

// DetokenizeContext is backends.Tokenizer's, over the model's tokenizer.
func (s *Summarizer) DetokenizeContext(ctx context.Context, ids []int32, renderSpecial bool) (string, error) {
	return textTokenizer{s.m.files}.DetokenizeContext(ctx, ids, renderSpecial)
}

// ApplyChatTemplateContext gives ErrNoChatTemplate.
func (s *Summarizer) ApplyChatTemplateContext(ctx context.Context, msgs []backends.Message, a bool) (string, error) {
	return textTokenizer{s.m.files}.ApplyChatTemplateContext(ctx, msgs, a)
}
