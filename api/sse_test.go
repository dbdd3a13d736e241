package api

import (
	"bytes"
	"encoding/json"
	"math"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/gin-gonic/gin"
	"github.com/modeld/modeld/api/core"
	"github.com/modeld/modeld/api/openai"
)

// sseCases are the events a stream sends: the plain per-token chunks that
// AppendChunk encodes by hand, with every escape in their strings, and the
// others that go through encoding/json.
func sseCases() []any {
	texts := []string{"", " tok", "<b>&</b>", "a\"b\\c\n\t", "\x00\x1f", "\u2028", "bad \xff utf8", "日本 🦙"}
	stop, length := "stop", "length"
	var vs []any
	for i, s := range texts {
		t := s
		for _, d := range []openai.ChunkDelta{{Content: &t}, {Role: "assistant", Content: &t}, {ReasoningContent: s}, {},
			{Role: "assistant"}, {Content: &t, ReasoningContent: s + "r"}} {
			vs = append(vs, openai.ChatCompletionChunk{ID: "chatcmpl-" + s, Object: "chat.completion.chunk", Created: int64(1700000000 + i),
				Model: "m/" + s, SystemFingerprint: "fp_" + s, Choices: []openai.ChunkChoice{{Index: i, Delta: d}}})
		}
		vs = append(vs,
			openai.ChatCompletionChunk{ID: "x", Object: "chat.completion.chunk", Model: s, Choices: []openai.ChunkChoice{{Index: 0, FinishReason: &stop}}},
			openai.Completion{ID: "cmpl-" + s, Object: "text_completion", Created: -5, Model: s, SystemFingerprint: s,
				Choices: []openai.CompletionChoice{{Text: s, Index: i}}},
			openai.Completion{ID: "c", Object: "text_completion", Choices: []openai.CompletionChoice{{Index: 1, FinishReason: &length}}},
		)
	}
	u := core.Usage{PromptTokens: 3, CompletionTokens: 4, TotalTokens: 7}
	content := "x"
	vs = append(vs,
		openai.ChatCompletionChunk{ID: "u", Choices: []openai.ChunkChoice{}, Usage: &u},
		openai.ChatCompletionChunk{ID: "n"},
		openai.ChatCompletionChunk{ID: "two", Choices: []openai.ChunkChoice{{Index: 0}, {Index: 1}}},
		openai.ChatCompletionChunk{ID: "lp", Choices: []openai.ChunkChoice{{Delta: openai.ChunkDelta{Content: &content}, Logprobs: map[string]any{"content": nil}}}},
		openai.ChatCompletionChunk{ID: "tc", Choices: []openai.ChunkChoice{{Delta: openai.ChunkDelta{ToolCalls: []openai.ChunkToolCall{{Index: 0, ID: "call_1", Type: "function"}}}}}},
		openai.Completion{ID: "u", Choices: []openai.CompletionChoice{}, Usage: &u},
		openai.Completion{ID: "lp", Choices: []openai.CompletionChoice{{Text: "x", Logprobs: map[string]any{"tokens": []string{"x"}}}}},
		gin.H{"error": gin.H{"message": "<boom>", "type": "server_error"}},
	)
	return vs
}

// TestSSEDataEqualsMarshal: every event's data is json.Marshal's bytes,
// whether AppendChunk or encoding/json wrote it.
func TestSSEDataEqualsMarshal(t *testing.T) {
	w := &core.SseWriter{Fast: openai.AppendChunk}
	fast := 0
	for _, v := range sseCases() {
		want, err := json.Marshal(v)
		if err != nil {
			t.Fatal(err)
		}
		if got := w.AppendData([]byte("data: "), v); !bytes.Equal(got, append([]byte("data: "), want...)) {
			t.Errorf("%#v:\n got %s\nwant data: %s", v, got, want)
		}
		if _, ok := openai.AppendChunk(nil, v); ok {
			fast++
		}
	}
	if fast < 60 {
		t.Errorf("appendChunk encoded %d of the cases, want the plain chunks (at least 60)", fast)
	}
}

// TestSSEUnencodable: a value encoding/json refuses becomes an error event.
func TestSSEUnencodable(t *testing.T) {
	got := (&core.SseWriter{Fast: openai.AppendChunk}).AppendData(nil, gin.H{"x": math.Inf(1)})
	var ev struct {
		Error struct{ Message, Type string }
	}
	if err := json.Unmarshal(got, &ev); err != nil || ev.Error.Type != "server_error" || ev.Error.Message == "" {
		t.Errorf("got %s (%v)", got, err)
	}
}

// TestSSEChunkAllocations: a plain token chunk is encoded with no
// allocation once the writer's buffer has grown.
func TestSSEChunkAllocations(t *testing.T) {
	text := " tok"
	var v any = openai.ChatCompletionChunk{ID: "chatcmpl-1", Object: "chat.completion.chunk", Created: 1, Model: "m",
		SystemFingerprint: "fp", Choices: []openai.ChunkChoice{{Delta: openai.ChunkDelta{Content: &text}}}}
	var tv any = openai.Completion{ID: "cmpl-1", Object: "text_completion", Created: 1, Model: "m",
		SystemFingerprint: "fp", Choices: []openai.CompletionChoice{{Text: text}}}
	w := &core.SseWriter{Fast: openai.AppendChunk}
	for _, x := range []any{v, tv} {
		w.Buf = w.AppendData(w.Buf[:0], x)
		if n := testing.AllocsPerRun(100, func() { w.Buf = w.AppendData(w.Buf[:0], x) }); n != 0 {
			t.Errorf("%T: %v allocations per chunk, want 0", x, n)
		}
	}
}

// TestSSEWrites: each event goes out as "data: <json>\n\n", flushed, and
// the stream ends with [DONE].
func TestSSEWrites(t *testing.T) {
	gin.SetMode(gin.TestMode)
	rec := httptest.NewRecorder()
	c, _ := gin.CreateTestContext(rec)
	w := core.NewSSE(c)
	w.Fast = openai.AppendChunk
	text := "hi"
	w.Send(openai.Completion{ID: "a", Choices: []openai.CompletionChoice{{Text: text}}})
	w.Send(gin.H{"k": "<v>"})
	w.Done()
	want := `data: {"id":"a","object":"","created":0,"model":"","system_fingerprint":"","choices":[{"text":"hi","index":0,"logprobs":null,"finish_reason":null}]}` +
		"\n\n" + `data: {"k":"\u003cv\u003e"}` + "\n\ndata: [DONE]\n\n"
	if rec.Code != http.StatusOK || rec.Body.String() != want || !rec.Flushed {
		t.Errorf("status %d, flushed %v, body:\n%s\nwant:\n%s", rec.Code, rec.Flushed, rec.Body.String(), want)
	}
	if ct := rec.Header().Get("Content-Type"); ct != "text/event-stream" {
		t.Errorf("Content-Type %q", ct)
	}
}
