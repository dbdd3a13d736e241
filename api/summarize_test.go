package api

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/modeld/modeld/api/core"
	"github.com/modeld/modeld/api/tasks"
	"github.com/modeld/modeld/backends"
)

// fakeSummarize summarizes text t as "sum of t" in the pieces "sum", " of", " t",
// then an end-of-sequence token; err fails after failAfter pieces.
type fakeSummarize struct {
	fakeBase
	err       error
	failAfter int
	gotOpts   backends.SummarizeOptions
	calls     int
}

func (f *fakeSummarize) Summarize(ctx context.Context, texts []string, opts backends.SummarizeOptions) (backends.SummarizeResult, error) {
	f.gotOpts = opts
	f.calls++
	res := backends.SummarizeResult{InputTokens: 5 * len(texts), Device: "cpu"}
	for i, t := range texts {
		pieces := []string{"sum", " of", " " + t}
		for j, p := range pieces {
			if f.err != nil && j == f.failAfter {
				return backends.SummarizeResult{}, f.err
			}
			if opts.OnToken != nil {
				if err := opts.OnToken(backends.TokenEvent{Index: i, TokenID: int64(10 + j), Text: p}); err != nil {
					return backends.SummarizeResult{}, err
				}
			}
		}
		if opts.OnToken != nil {
			if err := opts.OnToken(backends.TokenEvent{Index: i, TokenID: 3}); err != nil {
				return backends.SummarizeResult{}, err
			}
		}
		res.Summaries = append(res.Summaries, backends.Summary{Text: strings.Join(pieces, ""), TokenIDs: []int64{10, 11, 12}, FinishReason: "stop"})
		res.OutputTokens += 4
	}
	return res, ctx.Err()
}

func TestSummarize(t *testing.T) {
	sm := &fakeSummarize{fakeBase: fakeBase{backends.TaskSummarize}}
	s, _ := pipelineServer(t, map[string]backends.Model{"s": sm})
	var got tasks.SummaryList
	w := pipePost(t, s, "/v1/summarize", `{"model":"s","input":["a","b"],"max_new_tokens":9,"min_new_tokens":2,"num_beams":3,
		"length_penalty":0.5,"early_stopping":"never","no_repeat_ngram_size":0}`)
	decodeBody(t, w, &got)
	if got.Object != "list" || got.Model != "s" || len(got.Data) != 2 {
		t.Fatalf("response = %+v", got)
	}
	if got.Usage.PromptTokens != 10 || got.Usage.CompletionTokens != 8 || got.Usage.TotalTokens != 18 {
		t.Errorf("usage = %+v", got.Usage)
	}
	for i, d := range got.Data {
		if d.Object != "summary" || d.Index != i || d.SummaryText != "sum of "+string(rune('a'+i)) || d.FinishReason != "stop" {
			t.Errorf("data[%d] = %+v", i, d)
		}
	}
	o := sm.gotOpts
	if o.MaxNewTokens != 9 || *o.MinNewTokens != 2 || o.NumBeams != 3 || *o.LengthPenalty != 0.5 ||
		o.EarlyStopping != backends.EarlyStoppingNever || *o.NoRepeatNgramSize != 0 || o.OnToken != nil {
		t.Errorf("options = %+v", o)
	}
	for body, want := range map[string]backends.EarlyStopping{
		`{"model":"s","input":"a"}`:                        backends.EarlyStoppingDefault,
		`{"model":"s","input":"a","early_stopping":true}`:  backends.EarlyStoppingTrue,
		`{"model":"s","input":"a","early_stopping":false}`: backends.EarlyStoppingFalse,
	} {
		decodeBody(t, pipePost(t, s, "/v1/summarize", body), &got)
		if sm.gotOpts.EarlyStopping != want || sm.gotOpts.MinNewTokens != nil || sm.gotOpts.NumBeams != 0 {
			t.Errorf("%s: options %+v", body, sm.gotOpts)
		}
	}
}

func TestSummarizeStream(t *testing.T) {
	sm := &fakeSummarize{fakeBase: fakeBase{backends.TaskSummarize}}
	s, _ := pipelineServer(t, map[string]backends.Model{"s": sm})
	w := pipePost(t, s, "/v1/summarize", `{"model":"s","input":"x","stream":true}`)
	if w.Code != 200 || !strings.HasPrefix(w.Header().Get("Content-Type"), "text/event-stream") || w.Header().Get(core.DeviceHeader) != "cpu" {
		t.Fatalf("status %d, headers %v", w.Code, w.Header())
	}
	events := readSSE(t, w.Body.String())
	if len(events) != 5 || events[4] != "[DONE]" {
		t.Fatalf("events = %q", events)
	}
	var text strings.Builder
	for _, ev := range events[:3] {
		var ch tasks.SummaryChunk
		if err := json.Unmarshal([]byte(ev), &ch); err != nil {
			t.Fatal(err)
		}
		if ch.Object != "summary.chunk" || ch.Model != "s" || ch.FinishReason != nil || ch.Usage != nil || ch.SummaryText != nil {
			t.Errorf("chunk = %s", ev)
		}
		text.WriteString(ch.Delta)
	}
	if text.String() != "sum of x" {
		t.Errorf("deltas = %q", text.String())
	}
	var last tasks.SummaryChunk
	if err := json.Unmarshal([]byte(events[3]), &last); err != nil {
		t.Fatal(err)
	}
	if last.FinishReason == nil || *last.FinishReason != "stop" || last.Delta != "" || last.SummaryText == nil || *last.SummaryText != "sum of x" ||
		last.Usage == nil || last.Usage.PromptTokens != 5 || last.Usage.CompletionTokens != 4 || last.Usage.TotalTokens != 9 {
		t.Errorf("last event = %s", events[3])
	}
	if !strings.Contains(events[0], `"finish_reason":null`) {
		t.Errorf("a chunk must carry finish_reason null: %s", events[0])
	}
	// Streaming is greedy even when the model's generation config asks for beams.
	if sm.gotOpts.NumBeams != 1 || sm.gotOpts.OnToken == nil {
		t.Errorf("options = %+v", sm.gotOpts)
	}
}

func TestSummarizeStreamErrors(t *testing.T) {
	// Before the first token: an ordinary error response.
	sm := &fakeSummarize{fakeBase: fakeBase{backends.TaskSummarize}, err: fmt.Errorf("decoder: %w", backends.ErrBusy), failAfter: 0}
	s, _ := pipelineServer(t, map[string]backends.Model{"s": sm})
	w := pipePost(t, s, "/v1/summarize", `{"model":"s","input":"x","stream":true}`)
	wantError(t, w, 503, "", "too many requests waiting")
	// After it: an error event ends the stream.
	sm.err, sm.failAfter = errors.New("decoder: run failed"), 1
	w = pipePost(t, s, "/v1/summarize", `{"model":"s","input":"x","stream":true}`)
	events := readSSE(t, w.Body.String())
	if w.Code != 200 || len(events) != 2 || !strings.Contains(events[1], `"error"`) || !strings.Contains(events[1], "run failed") {
		t.Fatalf("events = %q", events)
	}
}

func TestSummarizeValidation(t *testing.T) {
	sm := &fakeSummarize{fakeBase: fakeBase{backends.TaskSummarize}}
	s, _ := pipelineServer(t, map[string]backends.Model{"s": sm})
	cases := []struct{ body, param, msg string }{
		{`{"model":"s","input":""}`, "input", "empty string"},
		{`{"model":"s","input":"a","max_new_tokens":0}`, "max_new_tokens", "at least 1"},
		{`{"model":"s","input":"a","min_new_tokens":-1}`, "min_new_tokens", "must not be negative"},
		{`{"model":"s","input":"a","min_new_tokens":5,"max_new_tokens":4}`, "min_new_tokens", "exceeds max_new_tokens"},
		{`{"model":"s","input":"a","num_beams":0}`, "num_beams", "at least 1"},
		{`{"model":"s","input":"a","no_repeat_ngram_size":-2}`, "no_repeat_ngram_size", "must not be negative"},
		{`{"model":"s","input":"a","early_stopping":"sometimes"}`, "early_stopping", "true, false or \"never\""},
		{`{"model":"s","input":["a","b"],"stream":true}`, "stream", "single input"},
		{`{"model":"s","input":"a","stream":true,"num_beams":2}`, "num_beams", "greedy search"},
	}
	for _, c := range cases {
		wantError(t, pipePost(t, s, "/v1/summarize", c.body), 400, c.param, c.msg)
	}
	if sm.calls != 0 {
		t.Errorf("invalid requests reached the model %d times", sm.calls)
	}
}
