package llama

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"math"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/modeld/modeld/backends"
	"github.com/modeld/modeld/backends/llama/wire"
)

// wireTrip sends v through JSON and back, as the runner socket does.
func wireTrip[T any](t *testing.T, v T) T {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	var out T
	if err := json.Unmarshal(b, &out); err != nil {
		t.Fatal(err)
	}
	return out
}

func TestWireErrors(t *testing.T) {
	cl := &backends.ContextOverflowError{PromptTokens: 100, MaxTokens: 50, ContextSize: 128}
	errs := []error{
		fmt.Errorf("%w: top_p 2 is outside [0, 1]", ErrInvalidRequest),
		ErrBusy, ErrClosed, ErrNoChatTemplate, ErrNotInitialized,
		fmt.Errorf("%w: %w", ErrTemplate, errors.New("undefined variable")),
		fmt.Errorf("%w: llama.cpp could not load x: %w", ErrInvalidModel, errors.New("boom")),
		fmt.Errorf("%w: llama_decode returned 1", ErrDecode),
		fmt.Errorf("wrapped: %w", cl),
		context.Canceled, context.DeadlineExceeded,
		&RunnerExitError{PID: 7, Status: "killed by SIGKILL", Stderr: "abort"},
		errors.New("something else"),
	}
	for _, want := range errs {
		got := wireTrip(t, wire.FromError(want)).ToError()
		sameErr(t, want.Error(), got, want)
		var gotCL *backends.ContextOverflowError
		if errors.As(want, new(*backends.ContextOverflowError)) {
			if !errors.As(got, &gotCL) || *gotCL != *cl {
				t.Errorf("context length error came back as %v", got)
			}
		} else if errors.As(got, &gotCL) {
			t.Errorf("%v came back as a context length error", want)
		}
	}
	if wire.FromError(nil) != nil || (*wire.Error)(nil).ToError() != nil {
		t.Error("nil error does not stay nil")
	}
}

func TestWireRequestAndEvent(t *testing.T) {
	seed := int64(-3)
	req := Request{
		Prompt: []int32{1, 2, 3}, MaxTokens: 9, Stop: []string{"</s>", "<|im_end|>"},
		Sampling: backends.Sampling{Temperature: 0.7, TopK: 5, TopP: 0.9, MinP: 0.05, Seed: &seed,
			PresencePenalty: 0.1, FrequencyPenalty: -0.2, RepeatPenalty: 1.1, PenaltyLastN: 64,
			LogitBias: map[int32]float32{4: float32(math.Inf(-1)), 5: float32(math.Inf(1)), 6: 2.5, 7: -100}},
		Messages: []backends.Message{{Role: "assistant", ToolCalls: []backends.ToolCall{{ID: "c1", Name: "f", Arguments: `{"a":1}`}}},
			{Role: "tool", ToolCallID: "c1", Content: "2"}},
		Tools:      []backends.Tool{{Name: "f", Parameters: []byte(`{"type":"object"}`)}},
		ToolChoice: backends.ToolChoice{Mode: backends.ToolChoiceFunction, Name: "f"},
	}
	got, err := wireTrip(t, wire.FromRequest(req)).ToRequest()
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, req) {
		t.Errorf("request came back as\n%+v\nwant\n%+v", got, req)
	}
	if req.Sampling.LogitBias == nil {
		t.Error("toWireRequest changed the caller's request")
	}
	bad := wire.Request{Request: Request{Prompt: []int32{1}}, LogitBias: map[int32]string{1: "lots"}}
	if _, err := bad.ToRequest(); !errors.Is(err, ErrInvalidRequest) {
		t.Errorf("bad bias: %v", err)
	}

	evs := []Event{
		{Token: 42, Text: "<b>é"},
		{Token: 43, Text: "ok", ToolCalls: []backends.ToolCallDelta{{Index: 1, ID: "call_1", Name: "f", Arguments: `{"a":`}}},
		{Token: -1, Done: true, Finish: FinishLength, Usage: Usage{PromptTokens: 3, CompletionTokens: 9, CachedTokens: 2}},
		{Token: -1, Done: true, Finish: FinishError, Err: fmt.Errorf("%w: llama_decode returned 1", ErrDecode)},
	}
	for _, want := range evs {
		got := wireTrip(t, wire.FromEvent(want)).ToEvent()
		if want.Err != nil {
			sameErr(t, "event error", got.Err, want.Err)
			got.Err, want.Err = nil, nil
		}
		if !reflect.DeepEqual(got, want) {
			t.Errorf("event came back as %+v, want %+v", got, want)
		}
	}
}

// TestRunnerArgs: every engine option reaches the runner. A new field of
// Options fails here until the runner flags carry it.
func TestRunnerArgs(t *testing.T) {
	cfg := wire.Config{ModelPath: "/m/a b.gguf", Socket: "/tmp/s.sock", LibRoot: "/lib", CPUVariant: "zen4", ParentPID: 42, LogLevel: -4}
	v := reflect.ValueOf(&cfg.Options).Elem()
	for i := 0; i < v.NumField(); i++ {
		f := v.Field(i)
		switch f.Kind() {
		case reflect.Int, reflect.Int64:
			f.SetInt(int64(i) - 1) // distinct, and one of them negative
		case reflect.String:
			f.SetString(fmt.Sprintf("/a dir/%d=x", i))
		case reflect.Bool:
			f.SetBool(true) // the flags' default is false
		default:
			t.Fatalf("Options.%s is a %s: teach the runner flags about it", v.Type().Field(i).Name, f.Kind())
		}
	}
	got, err := wire.ParseArgs(cfg.Args(), new(strings.Builder))
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, cfg) {
		t.Errorf("parsed\n%+v\nwant\n%+v", got, cfg)
	}
	var usage strings.Builder
	if _, err := wire.ParseArgs([]string{"--slots=2", "extra"}, &usage); err == nil ||
		!strings.Contains(err.Error(), "--model is required") || !strings.Contains(err.Error(), "unexpected arguments") {
		t.Errorf("err = %v", err)
	}
	if _, err := wire.ParseArgs([]string{"-h"}, &usage); !errors.Is(err, flag.ErrHelp) || !strings.Contains(usage.String(), "-model") {
		t.Errorf("help: %v, %q", err, usage.String())
	}
}

func TestTailAndLines(t *testing.T) {
	tb := &tailBuffer{max: 32}
	var lines []string
	w := &lineWriter{fn: func(l string) { lines = append(lines, l); tb.addLine(l) }}
	_, _ = w.Write([]byte("first line\nsecond "))
	_, _ = w.Write([]byte("line\r\nthird line that is long\nunterminated"))
	w.flush()
	want := []string{"first line", "second line", "third line that is long", "unterminated"}
	if !reflect.DeepEqual(lines, want) {
		t.Errorf("lines %q, want %q", lines, want)
	}
	if got := tb.String(); got != "unterminated" {
		t.Errorf("tail %q, want the last whole line", got)
	}
	small := &tailBuffer{max: 100}
	small.addLine("a")
	small.addLine("b\xff")
	if got := small.String(); got != "a\nb\uFFFD" {
		t.Errorf("tail %q", got)
	}

	if st, ok := parseStatus(wire.StatusPrefix + `{"ready":true,"pid":5}`); !ok || !st.Ready || st.PID != 5 {
		t.Errorf("status %+v %v", st, ok)
	}
	st, ok := parseStatus(strings.TrimSuffix(string(wire.EncodeStatus(wire.Status{Error: wire.FromError(ErrInvalidModel)})), "\n"))
	if !ok || !errors.Is(st.Error.ToError(), ErrInvalidModel) {
		t.Errorf("error status %+v %v", st, ok)
	}
	for _, l := range []string{"ready", wire.StatusPrefix + "{}", wire.StatusPrefix + "nope"} {
		if _, ok := parseStatus(l); ok {
			t.Errorf("%q read as a status", l)
		}
	}
}

// TestWireTypedErrors: the typed errors of package backends cross the
// socket with their fields, so errors.As finds them in the daemon.
func TestWireTypedErrors(t *testing.T) {
	busy := &backends.BusyError{Reason: "llama: all 2 slots are busy and 4 requests wait", RetryAfter: 3 * time.Second}
	got := wireTrip(t, wire.FromError(fmt.Errorf("generate: %w", busy))).ToError()
	var gb *backends.BusyError
	if !errors.As(got, &gb) || *gb != *busy || !errors.Is(got, backends.ErrBusy) || gb.RetryAfterDuration() != 3*time.Second {
		t.Errorf("busy came back as %#v", got)
	}
	bad := &backends.BadRequestError{Param: "tools", Message: "llama does not support tools yet"}
	got = wireTrip(t, wire.FromError(bad)).ToError()
	var gbr *backends.BadRequestError
	if !errors.As(got, &gbr) || gbr.Param != "tools" || !errors.Is(got, backends.ErrInvalidRequest) {
		t.Errorf("bad request came back as %#v", got)
	}
	died := &RunnerExitError{Backend: "llama", PID: 9, Status: "killed by SIGKILL", Stderr: "GGML_ASSERT", Stalled: time.Minute}
	got = wireTrip(t, wire.FromError(died)).ToError()
	var gd *backends.RunnerDiedError
	if !errors.As(got, &gd) || *gd != *died || !errors.Is(got, ErrRunnerStalled) || !errors.Is(got, ErrRunnerExited) {
		t.Errorf("runner death came back as %#v", got)
	}
	over := &backends.ContextOverflowError{PromptTokens: 70, ContextSize: 64}
	got = wireTrip(t, wire.FromError(over)).ToError()
	var go_ *backends.ContextOverflowError
	if !errors.As(got, &go_) || go_.PromptTokens != 70 || go_.ContextSize != 64 || !errors.Is(got, backends.ErrContextOverflow) {
		t.Errorf("overflow came back as %#v", got)
	}
}
