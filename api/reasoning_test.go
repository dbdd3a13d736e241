package api

import (
	"context"
	"encoding/json"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/modeld/modeld/backends"
	"github.com/modeld/modeld/cache"
)

// reasoningReply is a reasoning model's output as the backend splits it:
// reasoning deltas, then content.
func reasoningReply(backends.Request) []backends.Event {
	return []backends.Event{
		{Token: 1, Reasoning: "2 is"},
		{Token: 2, Reasoning: " prime."},
		{Token: 3}, // </think>
		{Token: 4, Text: "Two."},
		{Token: -1, Done: true, Finish: backends.FinishStop, Usage: backends.Usage{PromptTokens: 5, CompletionTokens: 5, ReasoningTokens: 3}},
	}
}

var registerReasoning = sync.OnceFunc(func() {
	backends.Register("fake-reasoning", func(_ context.Context, _ backends.LoadSpec) (backends.Model, error) {
		return &fakeModel{got: make(chan backends.Request, 8), reply: reasoningReply}, nil
	})
})

func reasoningServer(t *testing.T) *Server {
	registerReasoning()
	s, _ := backendServer(t, "fake-reasoning")
	return s
}

// TestReasoningContentWire: the backend's reasoning is message.reasoning_content
// (content holds the answer only, usage as usual), and in a stream
// delta.reasoning_content chunks that join to the same text, never mixed
// into delta.content.
func TestReasoningContentWire(t *testing.T) {
	s := reasoningServer(t)
	w := post(t, s, "/v1/chat/completions", `{"model":"fake","messages":[{"role":"user","content":"prime?"}]}`)
	if w.Code != 200 {
		t.Fatalf("status %d: %s", w.Code, w.Body)
	}
	var cc struct {
		Choices []struct {
			Message struct {
				Content          *string `json:"content"`
				ReasoningContent *string `json:"reasoning_content"`
			} `json:"message"`
			FinishReason string `json:"finish_reason"`
		} `json:"choices"`
		Usage struct {
			CompletionTokens int `json:"completion_tokens"`
		} `json:"usage"`
	}
	if err := json.Unmarshal(w.Body.Bytes(), &cc); err != nil {
		t.Fatal(err)
	}
	m := cc.Choices[0].Message
	if m.Content == nil || *m.Content != "Two." || m.ReasoningContent == nil || *m.ReasoningContent != "2 is prime." ||
		cc.Choices[0].FinishReason != "stop" || cc.Usage.CompletionTokens != 5 {
		t.Fatalf("completion = %s", w.Body)
	}

	w = post(t, s, "/v1/chat/completions", `{"model":"fake","stream":true,"messages":[{"role":"user","content":"prime?"}]}`)
	if w.Code != 200 {
		t.Fatalf("stream status %d: %s", w.Code, w.Body)
	}
	var content, reasoning string
	var reasoningChunks int
	for _, line := range strings.Split(w.Body.String(), "\n") {
		data, ok := strings.CutPrefix(line, "data: ")
		if !ok || data == "[DONE]" {
			continue
		}
		var ch struct {
			Choices []struct {
				Delta map[string]any `json:"delta"`
			} `json:"choices"`
		}
		if err := json.Unmarshal([]byte(data), &ch); err != nil {
			t.Fatalf("chunk %s: %v", data, err)
		}
		for _, c := range ch.Choices {
			r, hasR := c.Delta["reasoning_content"].(string)
			txt, hasC := c.Delta["content"].(string)
			if hasR && hasC && txt != "" {
				t.Errorf("chunk mixes reasoning and content: %s", data)
			}
			if hasR {
				reasoningChunks++
				reasoning += r
			}
			content += txt
		}
	}
	if reasoning != "2 is prime." || reasoningChunks != 2 || content != "Two." {
		t.Fatalf("streamed reasoning %q (%d chunks) content %q:\n%s", reasoning, reasoningChunks, content, w.Body)
	}
}

// TestNoReasoningNoField: a model without reasoning sends no
// reasoning_content key.
func TestNoReasoningNoField(t *testing.T) {
	s, got := toolServer(t)
	w := post(t, s, "/v1/chat/completions", `{"model":"fake","messages":[{"role":"user","content":"weather?"}],"tools":[`+weatherTool+`]}`)
	<-got
	if w.Code != 200 || strings.Contains(w.Body.String(), "reasoning_content") {
		t.Fatalf("status %d: %s", w.Code, w.Body)
	}
}

// varsChatTok is a fakeChat whose ChatPromptContext reports the template
// variables its context carries.
type varsChatTok struct {
	*fakeChat
	vars chan map[string]any
}

func (f *varsChatTok) ChatPromptContext(ctx context.Context, _ []backends.Message, _ []backends.Tool, _ bool) ([]int32, error) {
	f.vars <- backends.TemplateVars(ctx)
	return []int32{1000}, nil
}

// TestChatTemplateKwargs: chat_template_kwargs reach the model's chat
// rendering as template variables, with thinking on unless they say
// otherwise (enable_thinking and thinking, set alike); a value that is not
// an object is a 400.
func TestChatTemplateKwargs(t *testing.T) {
	m := &varsChatTok{fakeChat: &fakeChat{template: true, finish: backends.FinishStop, gotReq: make(chan backends.Request, 2)}, vars: make(chan map[string]any, 2)}
	s := chatServer(t, map[string]cache.Instance{"v": m})
	w := post(t, s, "/v1/chat/completions", `{"model":"v","messages":[{"role":"user","content":"hi"}],"chat_template_kwargs":{"enable_thinking":false}}`)
	if w.Code != 200 {
		t.Fatalf("status %d: %s", w.Code, w.Body)
	}
	<-m.gotReq
	if v := <-m.vars; len(v) != 2 || v["enable_thinking"] != false || v["thinking"] != false {
		t.Errorf("template vars %v, want enable_thinking and thinking false", v)
	}
	w = post(t, s, "/v1/chat/completions", `{"model":"v","messages":[{"role":"user","content":"hi"}]}`)
	if w.Code != 200 {
		t.Fatalf("status %d: %s", w.Code, w.Body)
	}
	<-m.gotReq
	if v := <-m.vars; len(v) != 2 || v["enable_thinking"] != true || v["thinking"] != true {
		t.Errorf("template vars %v without chat_template_kwargs, want thinking on", v)
	}
	// /v1/tokenize counts the same prompt.
	if ids := tokenizeOK(t, s, `{"model":"v","messages":[{"role":"user","content":"hi"}],"chat_template_kwargs":{"enable_thinking":false}}`); !slices.Equal(ids, []int32{1000}) {
		t.Errorf("tokenize: %v", ids)
	}
	if v := <-m.vars; len(v) != 2 || v["enable_thinking"] != false || v["thinking"] != false {
		t.Errorf("tokenize template vars %v, want enable_thinking and thinking false", v)
	}
	if w := post(t, s, "/v1/chat/completions", `{"model":"v","messages":[{"role":"user","content":"hi"}],"chat_template_kwargs":[1]}`); w.Code != 400 {
		t.Errorf("chat_template_kwargs [1]: status %d, want 400: %s", w.Code, w.Body)
	}
}
