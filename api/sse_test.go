package api

import (
	"bytes"
	"encoding/json"
	"math"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/gin-gonic/gin"
)

// sseCases are the events a stream sends: the plain per-token chunks that
// appendChunk encodes by hand, with every escape in their strings, and the
// others that go through encoding/json.
func sseCases() []any {
	texts := []string{"", " tok", "<b>&</b>", "a\"b\\c\n\t", "\x00\x1f", "\u2028", "bad \xff utf8", "日本 🦙"}
	stop, length := "stop", "length"
	var vs []any
	for i, s := range texts {
		t := s
		for _, d := range []ChunkDelta{{Content: &t}, {Role: "assistant", Content: &t}, {ReasoningContent: s}, {},
			{Role: "assistant"}, {Content: &t, ReasoningContent: s + "r"}} {
			vs = append(vs, ChatCompletionChunk{ID: "chatcmpl-" + s, Object: "chat.completion.chunk", Created: int64(1700000000 + i),
				Model: "m/" + s, SystemFingerprint: "fp_" + s, Choices: []ChunkChoice{{Index: i, Delta: d}}})
		}
		vs = append(vs,
			ChatCompletionChunk{ID: "x", Object: "chat.completion.chunk", Model: s, Choices: []ChunkChoice{{Index: 0, FinishReason: &stop}}},
			Completion{ID: "cmpl-" + s, Object: "text_completion", Created: -5, Model: s, SystemFingerprint: s,
				Choices: []CompletionChoice{{Text: s, Index: i}}},
			Completion{ID: "c", Object: "text_completion", Choices: []CompletionChoice{{Index: 1, FinishReason: &length}}},
		)
	}
	u := Usage{PromptTokens: 3, CompletionTokens: 4, TotalTokens: 7}
	content := "x"
	vs = append(vs,
		ChatCompletionChunk{ID: "u", Choices: []ChunkChoice{}, Usage: &u},
		ChatCompletionChunk{ID: "n"},
		ChatCompletionChunk{ID: "two", Choices: []ChunkChoice{{Index: 0}, {Index: 1}}},
		ChatCompletionChunk{ID: "lp", Choices: []ChunkChoice{{Delta: ChunkDelta{Content: &content}, Logprobs: map[string]any{"content": nil}}}},
		ChatCompletionChunk{ID: "tc", Choices: []ChunkChoice{{Delta: ChunkDelta{ToolCalls: []ChunkToolCall{{Index: 0, ID: "call_1", Type: "function"}}}}}},
		Completion{ID: "u", Choices: []CompletionChoice{}, Usage: &u},
		Completion{ID: "lp", Choices: []CompletionChoice{{Text: "x", Logprobs: map[string]any{"tokens": []string{"x"}}}}},
		gin.H{"error": gin.H{"message": "<boom>", "type": "server_error"}},
	)
	return vs
}

// TestSSEDataEqualsMarshal: every event's data is json.Marshal's bytes,
// whether appendChunk or encoding/json wrote it.
func TestSSEDataEqualsMarshal(t *testing.T) {
	w := &sseWriter{fast: appendChunk}
	fast := 0
	for _, v := range sseCases() {
		want, err := json.Marshal(v)
		if err != nil {
			t.Fatal(err)
		}
		if got := w.appendData([]byte("data: "), v); !bytes.Equal(got, append([]byte("data: "), want...)) {
			t.Errorf("%#v:\n got %s\nwant data: %s", v, got, want)
		}
		if _, ok := appendChunk(nil, v); ok {
			fast++
		}
	}
	if fast < 60 {
		t.Errorf("appendChunk encoded %d of the cases, want the plain chunks (at least 60)", fast)
	}
}

// TestSSEUnencodable: a value encoding/json refuses becomes an error event.
func TestSSEUnencodable(t *testing.T) {
	got := (&sseWriter{fast: appendChunk}).appendData(nil, gin.H{"x": math.Inf(1)})
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
	var v any = ChatCompletionChunk{ID: "chatcmpl-1", Object: "chat.completion.chunk", Created: 1, Model: "m",
		SystemFingerprint: "fp", Choices: []ChunkChoice{{Delta: ChunkDelta{Content: &text}}}}
	var tv any = Completion{ID: "cmpl-1", Object: "text_completion", Created: 1, Model: "m",
		SystemFingerprint: "fp", Choices: []CompletionChoice{{Text: text}}}
	w := &sseWriter{fast: appendChunk}
	for _, x := range []any{v, tv} {
		w.buf = w.appendData(w.buf[:0], x)
		if n := testing.AllocsPerRun(100, func() { w.buf = w.appendData(w.buf[:0], x) }); n != 0 {
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
	w := newSSE(c)
	w.fast = appendChunk
	text := "hi"
	w.send(Completion{ID: "a", Choices: []CompletionChoice{{Text: text}}})
	w.send(gin.H{"k": "<v>"})
	w.done()
	want := `data: {"id":"a","object":"","created":0,"model":"","system_fingerprint":"","choices":[{"text":"hi","index":0,"logprobs":null,"finish_reason":null}]}` +
		"\n\n" + `data: {"k":"\u003cv\u003e"}` + "\n\ndata: [DONE]\n\n"
	if rec.Code != http.StatusOK || rec.Body.String() != want || !rec.Flushed {
		t.Errorf("status %d, flushed %v, body:\n%s\nwant:\n%s", rec.Code, rec.Flushed, rec.Body.String(), want)
	}
	if ct := rec.Header().Get("Content-Type"); ct != "text/event-stream" {
		t.Errorf("Content-Type %q", ct)
	}
}
