package api

import (
	"context"
	"encoding/json"
	"math"
	"strings"
	"testing"

	"github.com/modeld/modeld/api/core"
	"github.com/modeld/modeld/api/openai"
	"github.com/modeld/modeld/backends"
	"github.com/modeld/modeld/cache"
)

// choiceChat is a fakeChat that supports logprobs and n: choice i answers
// with the pieces, each prefixed with i ("0a", "0b" ...), interleaved
// between the choices; a token's logprob is -(position+1)/10, with
// alternatives "alt0", "alt1", ... below it. Choice 1 ends at the length
// limit, the others stop.
type choiceChat struct {
	*fakeChat
}

func (f choiceChat) Generate(_ context.Context, req backends.Request) (<-chan backends.Event, error) {
	if f.gotReq != nil {
		f.gotReq <- req
	}
	n := max(1, req.N)
	ch := make(chan backends.Event, n*(len(f.pieces)+1))
	for p, piece := range f.pieces {
		for i := 0; i < n; i++ {
			text := string(rune('0'+i)) + piece
			ev := backends.Event{Token: int32(p), Text: text, Index: i}
			if req.Logprobs {
				lp := &backends.Logprobs{TokenLogprob: backends.TokenLogprob{ID: int32(p), Bytes: []byte(text), Logprob: -float32(p+1) / 10}}
				for k := 0; k < req.TopLogprobs; k++ {
					lp.Top = append(lp.Top, backends.TokenLogprob{ID: int32(100 + k), Bytes: []byte("alt" + string(rune('0'+k))), Logprob: -float32(p+1)/10 - float32(k)})
				}
				ev.Logprobs = lp
			}
			ch <- ev
		}
	}
	for i := 0; i < n; i++ {
		finish := backends.FinishStop
		if i == 1 {
			finish = backends.FinishLength
		}
		ch <- backends.Event{Token: -1, Done: true, Finish: finish, Index: i,
			Usage: backends.Usage{PromptTokens: len(req.Prompt), CompletionTokens: len(f.pieces) + i, CachedTokens: 2}}
	}
	close(ch)
	return ch, nil
}

func choiceServer(t *testing.T) (*Server, chan backends.Request) {
	got := make(chan backends.Request, 1)
	m := choiceChat{&fakeChat{pieces: []string{"a", "b", "c"}, template: true, gotReq: got}}
	return chatServer(t, map[string]cache.Instance{"m": m}), got
}

func near(a, b float64) bool { return math.Abs(a-b) < 1e-6 }

// TestChatLogprobsChoices: n=2 with logprobs gives one choice per index,
// each with its own text, finish reason and logprobs.content (token,
// logprob, bytes, top_logprobs); the usage counts the prompt once and sums
// the completion tokens.
func TestChatLogprobsChoices(t *testing.T) {
	s, got := choiceServer(t)
	w := post(t, s, "/v1/chat/completions", `{"model":"m","messages":[{"role":"user","content":"hi"}],"n":2,"logprobs":true,"top_logprobs":2}`)
	if w.Code != 200 {
		t.Fatalf("status %d: %s", w.Code, w.Body)
	}
	if r := <-got; r.N != 2 || !r.Logprobs || r.TopLogprobs != 2 {
		t.Errorf("the backend got n %d, logprobs %v, top_logprobs %d", r.N, r.Logprobs, r.TopLogprobs)
	}
	var resp struct {
		Choices []struct {
			Index   int `json:"index"`
			Message struct {
				Content string `json:"content"`
			} `json:"message"`
			FinishReason string `json:"finish_reason"`
			Logprobs     struct {
				Content []struct {
					Token       string  `json:"token"`
					Logprob     float64 `json:"logprob"`
					Bytes       []int   `json:"bytes"`
					TopLogprobs []struct {
						Token   string  `json:"token"`
						Logprob float64 `json:"logprob"`
						Bytes   []int   `json:"bytes"`
					} `json:"top_logprobs"`
				} `json:"content"`
			} `json:"logprobs"`
		} `json:"choices"`
		Usage core.Usage `json:"usage"`
	}
	if err := json.Unmarshal(w.Body.Bytes(), &resp); err != nil {
		t.Fatal(err)
	}
	if len(resp.Choices) != 2 {
		t.Fatalf("%d choices: %s", len(resp.Choices), w.Body)
	}
	for i, c := range resp.Choices {
		p := string(rune('0' + i))
		if c.Index != i || c.Message.Content != p+"a"+p+"b"+p+"c" {
			t.Errorf("choice %d: index %d, content %q", i, c.Index, c.Message.Content)
		}
		if want := map[int]string{0: "stop", 1: "length"}[i]; c.FinishReason != want {
			t.Errorf("choice %d: finish_reason %q, want %q", i, c.FinishReason, want)
		}
		if len(c.Logprobs.Content) != 3 {
			t.Fatalf("choice %d: %d logprobs entries, want 3", i, len(c.Logprobs.Content))
		}
		for k, e := range c.Logprobs.Content {
			tok := p + string(rune('a'+k))
			if e.Token != tok || !near(e.Logprob, -float64(k+1)/10) || len(e.Bytes) != 2 || e.Bytes[0] != int(tok[0]) || e.Bytes[1] != int(tok[1]) {
				t.Errorf("choice %d token %d: %+v", i, k, e)
			}
			if len(e.TopLogprobs) != 2 || e.TopLogprobs[0].Token != "alt0" || e.TopLogprobs[1].Token != "alt1" ||
				!near(e.TopLogprobs[1].Logprob, -float64(k+1)/10-1) || len(e.TopLogprobs[0].Bytes) != 4 {
				t.Errorf("choice %d token %d: top_logprobs %+v", i, k, e.TopLogprobs)
			}
		}
	}
	if u := resp.Usage; u.PromptTokens == 0 || u.CompletionTokens != 3+4 || u.TotalTokens != u.PromptTokens+7 {
		t.Errorf("usage %+v, want the prompt once and 7 completion tokens", u)
	}
}

// TestChatLogprobsNull: without logprobs a choice's logprobs is null.
func TestChatLogprobsNull(t *testing.T) {
	s, _ := choiceServer(t)
	w := post(t, s, "/v1/chat/completions", `{"model":"m","messages":[{"role":"user","content":"hi"}]}`)
	if w.Code != 200 || !strings.Contains(w.Body.String(), `"logprobs":null`) || strings.Contains(w.Body.String(), `"index":1`) {
		t.Fatalf("status %d: %s", w.Code, w.Body)
	}
}

// TestChatLogprobsChoicesStream: streamed, every chunk names its choice;
// each choice's deltas reassemble its text, its logprobs ride on its
// chunks, it ends with its own finish chunk, and the usage chunk comes
// once, after all of them.
func TestChatLogprobsChoicesStream(t *testing.T) {
	s, _ := choiceServer(t)
	w := post(t, s, "/v1/chat/completions", `{"model":"m","messages":[{"role":"user","content":"hi"}],"n":3,"logprobs":true,"top_logprobs":1,"stream":true,"stream_options":{"include_usage":true}}`)
	if w.Code != 200 {
		t.Fatalf("status %d: %s", w.Code, w.Body)
	}
	lines := readSSE(t, w.Body.String())
	if lines[len(lines)-1] != "[DONE]" {
		t.Fatalf("stream ends with %q", lines[len(lines)-1])
	}
	text := make([]string, 3)
	roles := make([]int, 3)
	lps := make([][]string, 3)
	finish := make([]string, 3)
	var usage *core.Usage
	for _, l := range lines[:len(lines)-1] {
		var ch struct {
			Choices []struct {
				Index int `json:"index"`
				Delta struct {
					Role    string  `json:"role"`
					Content *string `json:"content"`
				} `json:"delta"`
				Logprobs *struct {
					Content []struct {
						Token       string `json:"token"`
						TopLogprobs []struct {
							Token string `json:"token"`
						} `json:"top_logprobs"`
					} `json:"content"`
				} `json:"logprobs"`
				FinishReason *string `json:"finish_reason"`
			} `json:"choices"`
			Usage *core.Usage `json:"usage"`
		}
		if err := json.Unmarshal([]byte(l), &ch); err != nil {
			t.Fatalf("%v: %s", err, l)
		}
		if ch.Usage != nil {
			if usage != nil || len(ch.Choices) != 0 {
				t.Errorf("a second usage chunk, or one with choices: %s", l)
			}
			usage = ch.Usage
			continue
		}
		if len(ch.Choices) != 1 {
			t.Fatalf("chunk with %d choices: %s", len(ch.Choices), l)
		}
		c := ch.Choices[0]
		if c.Index < 0 || c.Index > 2 || finish[c.Index] != "" || usage != nil {
			t.Fatalf("chunk out of place: %s", l)
		}
		if c.Delta.Role == "assistant" {
			roles[c.Index]++
		}
		if c.Delta.Content != nil {
			text[c.Index] += *c.Delta.Content
		}
		if c.Logprobs != nil {
			for _, e := range c.Logprobs.Content {
				if len(e.TopLogprobs) != 1 {
					t.Errorf("top_logprobs %+v, want 1", e.TopLogprobs)
				}
				lps[c.Index] = append(lps[c.Index], e.Token)
			}
		}
		if c.FinishReason != nil {
			finish[c.Index] = *c.FinishReason
		}
	}
	for i := 0; i < 3; i++ {
		p := string(rune('0' + i))
		if roles[i] != 1 || text[i] != p+"a"+p+"b"+p+"c" || strings.Join(lps[i], ",") != p+"a,"+p+"b,"+p+"c" {
			t.Errorf("choice %d: %d role chunks, text %q, logprob tokens %v", i, roles[i], text[i], lps[i])
		}
		if want := map[int]string{1: "length"}[i]; finish[i] != want && !(want == "" && finish[i] == "stop") {
			t.Errorf("choice %d finish %q", i, finish[i])
		}
	}
	if usage == nil || usage.CompletionTokens != 3+4+5 {
		t.Errorf("usage %+v, want 12 completion tokens", usage)
	}
}

// TestCompletionsLogprobs: the legacy integer logprobs gives the
// completions shape (tokens, token_logprobs, top_logprobs maps,
// text_offset), streamed and not.
func TestCompletionsLogprobs(t *testing.T) {
	s, got := choiceServer(t)
	w := post(t, s, "/v1/completions", `{"model":"m","prompt":"hi","logprobs":2,"n":2}`)
	if w.Code != 200 {
		t.Fatalf("status %d: %s", w.Code, w.Body)
	}
	if r := <-got; !r.Logprobs || r.TopLogprobs != 2 || r.N != 2 {
		t.Errorf("the backend got logprobs %v, top %d, n %d", r.Logprobs, r.TopLogprobs, r.N)
	}
	var resp struct {
		Choices []struct {
			Index    int                      `json:"index"`
			Text     string                   `json:"text"`
			Logprobs *core.CompletionLogprobs `json:"logprobs"`
		} `json:"choices"`
	}
	if err := json.Unmarshal(w.Body.Bytes(), &resp); err != nil {
		t.Fatal(err)
	}
	if len(resp.Choices) != 2 || resp.Choices[1].Index != 1 || resp.Choices[1].Text != "1a1b1c" {
		t.Fatalf("choices: %s", w.Body)
	}
	lp := resp.Choices[1].Logprobs
	if lp == nil || strings.Join(lp.Tokens, ",") != "1a,1b,1c" || len(lp.TokenLogprobs) != 3 || !near(lp.TokenLogprobs[2], -0.3) ||
		len(lp.TextOffset) != 3 || lp.TextOffset[0] != 0 || lp.TextOffset[1] != 2 || lp.TextOffset[2] != 4 ||
		len(lp.TopLogprobs) != 3 || len(lp.TopLogprobs[0]) != 2 || !near(lp.TopLogprobs[0]["alt1"], -1.1) {
		t.Errorf("logprobs %+v", lp)
	}

	w = post(t, s, "/v1/completions", `{"model":"m","prompt":"hi","logprobs":0,"stream":true}`)
	<-got
	var tokens []string
	var offsets []int
	for _, l := range readSSE(t, w.Body.String()) {
		if l == "[DONE]" {
			continue
		}
		var ch openai.Completion
		var raw struct {
			Choices []struct {
				Logprobs *core.CompletionLogprobs `json:"logprobs"`
			} `json:"choices"`
		}
		if json.Unmarshal([]byte(l), &ch) != nil || json.Unmarshal([]byte(l), &raw) != nil {
			t.Fatalf("chunk %s", l)
		}
		for _, c := range raw.Choices {
			if c.Logprobs != nil {
				if len(c.Logprobs.TopLogprobs) != 1 || c.Logprobs.TopLogprobs[0] != nil {
					t.Errorf("logprobs 0 gave top_logprobs %v, want null", c.Logprobs.TopLogprobs)
				}
				tokens = append(tokens, c.Logprobs.Tokens...)
				offsets = append(offsets, c.Logprobs.TextOffset...)
			}
		}
	}
	if strings.Join(tokens, ",") != "0a,0b,0c" || len(offsets) != 3 || offsets[2] != 4 {
		t.Errorf("streamed tokens %v, offsets %v", tokens, offsets)
	}
}

// TestLogprobsRefused: what is out of range, or malformed, is a 400 naming
// the field.
func TestLogprobsRefused(t *testing.T) {
	s, _ := choiceServer(t)
	for _, c := range []struct{ path, body, param, msg string }{
		{"/v1/completions", `{"model":"m","prompt":"hi","logprobs":21}`, "logprobs", "logprobs 21 is outside [0, 20]"},
		{"/v1/completions", `{"model":"m","prompt":"hi","logprobs":"x"}`, "logprobs", "logprobs must be an integer in [0, 20] (or true or false)"},
		{"/v1/chat/completions", `{"model":"m","messages":[{"role":"user","content":"x"}],"logprobs":3}`, "logprobs", "logprobs must be true or false"},
		{"/v1/chat/completions", `{"model":"m","messages":[{"role":"user","content":"x"}],"top_logprobs":3}`, "top_logprobs", "top_logprobs needs logprobs: true"},
		{"/v1/chat/completions", `{"model":"m","messages":[{"role":"user","content":"x"}],"logprobs":true,"top_logprobs":21}`, "top_logprobs", "top_logprobs 21 is outside [0, 20]"},
	} {
		w := post(t, s, c.path, c.body)
		e := decodeError(t, w)
		if w.Code != 400 || e.Error.Param == nil || *e.Error.Param != c.param || e.Error.Message != c.msg {
			t.Errorf("%s: %d %+v, want 400 on %s: %s", c.body, w.Code, e.Error, c.param, c.msg)
		}
	}
}
