package engine

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	yz "github.com/hybridgroup/yzma/pkg/llama"

	"github.com/modeld/modeld/backends"
	"github.com/modeld/modeld/backends/toolcall"
	"github.com/modeld/modeld/internal/testenv"
)

// scripted sends pieces as token events and a final event with finish.
func scripted(pieces []string, finish FinishReason) <-chan Event {
	in := make(chan Event, len(pieces)+1)
	for i, p := range pieces {
		in <- Event{Token: int32(i), Text: p}
	}
	in <- Event{Token: -1, Done: true, Finish: finish}
	close(in)
	return in
}

// TestToolEventsHermes: a scripted Hermes output, cut into pieces at every
// byte, becomes content and one get_weather call whose streamed deltas
// reassemble to toolcall.Parse's call, and the finish reason tool_calls.
func TestToolEventsHermes(t *testing.T) {
	out := "Let me check.\n<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}}\n</tool_call>"
	content, calls, err := toolcall.Parse(toolcall.Hermes, out, nil)
	if err != nil || len(calls) != 1 || calls[0].Name != "get_weather" || calls[0].Arguments != `{"city": "Paris"}` {
		t.Fatalf("Parse = %q %+v %v", content, calls, err)
	}
	for _, step := range []int{1, 3, len(out)} {
		var pieces []string
		for i := 0; i < len(out); i += step {
			pieces = append(pieces, out[i:min(i+step, len(out))])
		}
		var text string
		var got []backends.ToolCall
		var last Event
		n := 0
		for ev := range toolEvents(scripted(pieces, FinishStop), toolcall.Hermes) {
			n++
			text += ev.Text
			for _, d := range ev.ToolCalls {
				if d.Index == len(got) {
					got = append(got, backends.ToolCall{})
				}
				c := &got[d.Index]
				if d.ID != "" {
					c.ID, c.Name = d.ID, d.Name
				}
				c.Arguments += d.Arguments
			}
			last = ev
		}
		if n != len(pieces)+1 || !last.Done || last.Finish != backends.FinishToolCalls {
			t.Errorf("step %d: %d events, last %+v; want %d, finish tool_calls", step, n, last, len(pieces)+1)
		}
		if text != content || len(got) != 1 || got[0].Name != "get_weather" || got[0].Arguments != calls[0].Arguments || got[0].ID == "" {
			t.Errorf("step %d: streamed %q %+v, want %q %+v", step, text, got, content, calls)
		}
	}
}

// TestToolEventsPlainText: an output without calls keeps its text and
// finish reason; one cut inside a call keeps FinishLength.
func TestToolEventsPlainText(t *testing.T) {
	var text string
	var last Event
	for ev := range toolEvents(scripted([]string{"It is ", "sunny <tool", " today."}, FinishStop), toolcall.Hermes) {
		text += ev.Text
		if len(ev.ToolCalls) > 0 {
			t.Errorf("calls in plain text: %+v", ev.ToolCalls)
		}
		last = ev
	}
	if text != "It is sunny <tool today." || last.Finish != FinishStop {
		t.Errorf("plain text = %q, finish %s", text, last.Finish)
	}
	calls := 0
	for ev := range toolEvents(scripted([]string{`<tool_call>{"name":"f","arguments":{"a":`}, FinishLength), toolcall.Hermes) {
		calls += len(ev.ToolCalls)
		last = ev
	}
	if calls == 0 || last.Finish != FinishLength {
		t.Errorf("cut call: %d deltas, finish %s; want the call's start and length", calls, last.Finish)
	}
}

// TestToolConversationQwen: a conversation with an assistant's tool call
// and the tool's result renders through the real Qwen2.5 (Hermes-format)
// template: the call's name and the result's text are in the prompt, and
// control-token text inside the result forges no control token (the same
// count as with a clean result).
func TestToolConversationQwen(t *testing.T) {
	initLib(t)
	m, err := Open(testenv.LlamaChatModel(t, "qwen2", "Qwen-Qwen2.5-7B-Instruct"), Options{ContextSize: 1024})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = m.Close() })
	if f := toolcall.Detect(m.Info().ChatTemplate); f != toolcall.Hermes {
		t.Fatalf("Qwen2.5's template is family %s, want hermes", f)
	}
	tools := []Tool{{Name: "get_weather", Description: "Weather of a city", Parameters: []byte(`{"type":"object","properties":{"city":{"type":"string"}}}`)}}
	conv := func(city, result string) []Message {
		args, _ := json.Marshal(map[string]any{"city": city, "days": 2})
		return []Message{
			{Role: "user", Content: "Weather in Paris?"},
			{Role: "assistant", ToolCalls: []backends.ToolCall{{ID: "call_1", Name: "get_weather", Arguments: string(args)}}},
			{Role: "tool", ToolCallID: "call_1", Content: result},
		}
	}
	clean, err := m.ChatPrompt(conv(`Paris "center"`, `{"temp_c": 21}`), tools, true)
	if err != nil {
		t.Fatal(err)
	}
	hostile, err := m.ChatPrompt(conv("Paris"+forged, `{"temp_c": 21}`+forged), tools, true)
	if err != nil {
		t.Fatal(err)
	}
	text, _ := m.Detokenize(clean, true)
	for _, want := range []string{"<tools>", `"get_weather"`, "<tool_response>\n{\"temp_c\": 21}\n</tool_response>", "<|im_start|>assistant\n"} {
		if !strings.Contains(text, want) {
			t.Errorf("prompt lacks %q:\n%s", want, text)
		}
	}
	// The assistant's turn is the call in the format the model is to
	// generate: the parser reads back the name and the arguments' object.
	turn := text[strings.Index(text, "<|im_start|>assistant\n")+len("<|im_start|>assistant\n"):]
	turn = turn[:strings.Index(turn, "<|im_end|>")]
	_, calls, err := toolcall.Parse(toolcall.Hermes, turn, nil)
	var args map[string]any
	if err != nil || len(calls) != 1 || calls[0].Name != "get_weather" || json.Unmarshal([]byte(calls[0].Arguments), &args) != nil ||
		args["city"] != `Paris "center"` || args["days"] != 2.0 {
		t.Errorf("the rendered call %q parses to %+v, %v", turn, calls, err)
	}
	if a, b := controlCount(t, m, clean), controlCount(t, m, hostile); a != b {
		t.Errorf("a tool call and result with control-token text give %d control tokens, clean ones %d", b, a)
	}
}

// scriptDecoder is a fakeDecoder that samples tokens 100, 101, ... for
// n steps and then the end of generation (2).
type scriptDecoder struct {
	*fakeDecoder
	n, at int
}

func (d *scriptDecoder) sample(int, int32) yz.Token {
	if d.at >= d.n {
		return 2
	}
	d.at++
	return yz.Token(99 + d.at)
}

// TestSchedulerToolCall: through the scheduler, a request whose tokens
// render (with control tokens as text) to a Hermes call gives the call's
// deltas and finish_reason tool_calls: the request's render is used, not
// the decoder's piece (which leaves the control tokens out, here "x").
func TestSchedulerToolCall(t *testing.T) {
	script := []string{"<tool_call>", "\n{\"name\": \"get_", "weather\", \"arguments\": {\"city\": ", "\"Paris\"}}\n", "</tool_call>"}
	dec := &scriptDecoder{fakeDecoder: newFakeDecoder(), n: len(script)}
	s := newSchedulerWith(dec, 1, 8, 1<<20, 0, Hooks{})
	go s.loop()
	t.Cleanup(s.stop)
	r := &request{ctx: context.Background(), prompt: []yz.Token{10, 11, 12}, budget: 64, stream: newStream(),
		render: func(tok yz.Token) string { return script[tok-100] }}
	if err := s.submit(r); err != nil {
		t.Fatal(err)
	}
	go r.stream.pump()
	var text, name, args string
	var last Event
	for ev := range toolEvents(r.stream.out, toolcall.Hermes) {
		text += ev.Text
		for _, d := range ev.ToolCalls {
			if d.Index != 0 {
				t.Errorf("delta of call %d", d.Index)
			}
			name += d.Name
			args += d.Arguments
		}
		last = ev
	}
	if text != "" || name != "get_weather" || args != `{"city": "Paris"}` || last.Finish != backends.FinishToolCalls || last.Usage.CompletionTokens != len(script)+1 {
		t.Errorf("content %q, call %s(%s), last %+v; want get_weather({\"city\": \"Paris\"}) and tool_calls", text, name, args, last)
	}
}
