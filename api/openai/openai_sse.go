package openai

import (
	"strconv"

	"github.com/modeld/modeld/internal/jsonstr"
)

// The OpenAI chunks' hand encoding, which its stream writer gives SseWriter.

// AppendChunk encodes the chunks a stream sends per token: a chat chunk or
// a text completion of one choice without logprobs, tool calls or usage.
// ok is false for anything else, which encoding/json writes.
func AppendChunk(b []byte, v any) (_ []byte, ok bool) {
	switch c := v.(type) {
	case ChatCompletionChunk:
		if len(c.Choices) != 1 || c.Usage != nil {
			return b, false
		}
		ch := &c.Choices[0]
		if ch.Logprobs != nil || len(ch.Delta.ToolCalls) > 0 {
			return b, false
		}
		b = appendChunkHead(b, c.ID, c.Object, c.Created, c.Model, c.SystemFingerprint)
		b = append(b, `{"index":`...)
		b = strconv.AppendInt(b, int64(ch.Index), 10)
		b = append(b, `,"delta":{`...)
		sep := false
		field := func(name, s string) {
			if sep {
				b = append(b, ',')
			}
			sep = true
			b = append(append(append(b, '"'), name...), `":`...)
			b = jsonstr.Append(b, s, true)
		}
		if ch.Delta.Role != "" {
			field("role", ch.Delta.Role)
		}
		if ch.Delta.Content != nil {
			field("content", *ch.Delta.Content)
		}
		if ch.Delta.ReasoningContent != "" {
			field("reasoning_content", ch.Delta.ReasoningContent)
		}
		b = append(b, `},"logprobs":null,"finish_reason":`...)
		b = appendFinish(b, ch.FinishReason)
		return append(b, "}]}"...), true
	case Completion:
		if len(c.Choices) != 1 || c.Usage != nil || c.Choices[0].Logprobs != nil {
			return b, false
		}
		ch := &c.Choices[0]
		b = appendChunkHead(b, c.ID, c.Object, c.Created, c.Model, c.SystemFingerprint)
		b = append(b, `{"text":`...)
		b = jsonstr.Append(b, ch.Text, true)
		b = append(b, `,"index":`...)
		b = strconv.AppendInt(b, int64(ch.Index), 10)
		b = append(b, `,"logprobs":null,"finish_reason":`...)
		b = appendFinish(b, ch.FinishReason)
		return append(b, "}]}"...), true
	}
	return b, false
}

// appendChunkHead writes a chunk's fields up to the opening of its choices.
func appendChunkHead(b []byte, id, object string, created int64, model, fingerprint string) []byte {
	b = append(b, `{"id":`...)
	b = jsonstr.Append(b, id, true)
	b = append(b, `,"object":`...)
	b = jsonstr.Append(b, object, true)
	b = append(b, `,"created":`...)
	b = strconv.AppendInt(b, created, 10)
	b = append(b, `,"model":`...)
	b = jsonstr.Append(b, model, true)
	b = append(b, `,"system_fingerprint":`...)
	b = jsonstr.Append(b, fingerprint, true)
	return append(b, `,"choices":[`...)
}

func appendFinish(b []byte, finish *string) []byte {
	if finish == nil {
		return append(b, "null"...)
	}
	return jsonstr.Append(b, *finish, true)
}
