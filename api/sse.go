package api

import (
	"bytes"
	"encoding/json"
	"net/http"
	"strconv"

	"github.com/gin-gonic/gin"

	"github.com/modeld/modeld/internal/jsonstr"
)

// sseWriter writes server-sent events in OpenAI's form: "data: <json>\n\n", each
// flushed at once, ended by "data: [DONE]". It is written once per generated
// token, so an event is built in one reused buffer and goes out in one
// write, and the plain token chunks of chat and text completions are
// encoded by hand (appendChunk), with the bytes encoding/json gives.
type sseWriter struct {
	c       *gin.Context
	started bool
	buf     []byte
	enc     *json.Encoder // into encBuf, for the events appendChunk leaves
	encBuf  bytes.Buffer
}

func newSSE(c *gin.Context) *sseWriter { return &sseWriter{c: c} }

func (w *sseWriter) start() {
	if w.started {
		return
	}
	w.started = true
	h := w.c.Writer.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-cache")
	h.Set("Connection", "keep-alive")
	h.Set("X-Accel-Buffering", "no")
	w.c.Status(http.StatusOK)
}

func (w *sseWriter) send(v any) {
	w.start()
	w.buf = w.appendData(append(w.buf[:0], "data: "...), v)
	_, _ = w.c.Writer.Write(append(w.buf, '\n', '\n'))
	w.c.Writer.Flush()
}

// appendData appends v as json.Marshal writes it (an error event when v
// cannot be encoded).
func (w *sseWriter) appendData(b []byte, v any) []byte {
	if out, ok := appendChunk(b, v); ok {
		return out
	}
	if w.enc == nil {
		w.enc = json.NewEncoder(&w.encBuf)
	}
	w.encBuf.Reset()
	if err := w.enc.Encode(v); err != nil {
		w.encBuf.Reset()
		_ = w.enc.Encode(gin.H{"error": gin.H{"message": err.Error(), "type": "server_error"}})
	}
	return append(b, bytes.TrimSuffix(w.encBuf.Bytes(), []byte("\n"))...)
}

func (w *sseWriter) done() {
	w.start()
	_, _ = w.c.Writer.Write([]byte("data: [DONE]\n\n"))
	w.c.Writer.Flush()
}

// appendChunk encodes the chunks a stream sends per token: a chat chunk or
// a text completion of one choice without logprobs, tool calls or usage.
// ok is false for anything else, which encoding/json writes.
func appendChunk(b []byte, v any) (_ []byte, ok bool) {
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
