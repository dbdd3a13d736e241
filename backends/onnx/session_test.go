package onnx

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/modeld/modeld/internal/testenv"
)

func runtimeForTest(t *testing.T) *Runtime {
	t.Helper()
	rt, err := Init(testenv.ONNXRuntimeLib(t))
	if err != nil {
		t.Fatalf("Init: %v", err)
	}
	return rt
}

func fixture(t *testing.T, parts ...string) string {
	t.Helper()
	p := filepath.Join(append([]string{"..", "..", "testdata", "onnx"}, parts...)...)
	if _, err := os.Stat(p); err != nil {
		t.Fatalf("fixture missing (regenerate with scripts/gen-onnx/gen.py): %v", err)
	}
	return p
}

func TestInitMissingLibrary(t *testing.T) {
	// A missing file is reported before ONNX Runtime is touched, so this cannot
	// disturb the process environment the other tests share.
	missing := filepath.Join(t.TempDir(), "libonnxruntime.so.1")
	_, err := Init(missing)
	if err == nil {
		// Init may already hold the real library from another test: then a new path
		// must be refused instead.
		t.Fatal("Init with a missing library succeeded")
	}
	msg := err.Error()
	if !strings.Contains(msg, "cannot switch") {
		if !errors.Is(err, ErrLibraryMissing) || !strings.Contains(msg, missing) || !strings.Contains(msg, "scripts/bootstrap") {
			t.Fatalf("error should name the file and scripts/bootstrap: %v", err)
		}
	}
}

func TestInitOnceAndVersion(t *testing.T) {
	rt := runtimeForTest(t)
	again := runtimeForTest(t)
	if rt != again {
		t.Fatal("second Init returned a different Runtime")
	}
	if !strings.HasPrefix(rt.Version(), "1.") {
		t.Fatalf("version = %q", rt.Version())
	}
	if _, err := Init(rt.LibraryPath() + ".other"); err == nil || !strings.Contains(err.Error(), "cannot switch") {
		t.Fatalf("Init with another path: %v", err)
	}
}

func TestSessionReadsIOAndRuns(t *testing.T) {
	rt := runtimeForTest(t)
	s, err := rt.NewSession(fixture(t, "classify", "onnx", "model.onnx"), SessionOptions{Threads: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer closeSession(t, s)
	if got := strings.Join(names(s.Inputs()), ","); got != "input_ids,attention_mask,token_type_ids" {
		t.Fatalf("inputs = %s", got)
	}
	in, _ := s.Input("input_ids")
	if in.Type != Int64 || len(in.Shape) != 2 || in.Shape[0] != -1 || in.Shape[1] != -1 {
		t.Fatalf("input_ids info = %+v", in)
	}
	if len(s.Outputs()) != 1 || s.Outputs()[0].Name != "logits" || s.Outputs()[0].Shape[1] != 3 {
		t.Fatalf("outputs = %+v", s.Outputs())
	}
	if s.Device() != DeviceCPU || s.FallbackReason() != "" {
		t.Fatalf("device %q fallback %q", s.Device(), s.FallbackReason())
	}
	out, err := s.Run(context.Background(), map[string]*Tensor{
		"input_ids":      NewInt64([]int64{2, 100, 101, 3, 2, 102, 3, 0}, 2, 4),
		"attention_mask": NewInt64([]int64{1, 1, 1, 1, 1, 1, 1, 0}, 2, 4),
		"token_type_ids": NewInt64(make([]int64, 8), 2, 4),
	})
	if err != nil {
		t.Fatal(err)
	}
	logits := out["logits"]
	if logits == nil || len(logits.Shape) != 2 || logits.Shape[0] != 2 || logits.Shape[1] != 3 || len(logits.F32) != 6 {
		t.Fatalf("logits = %+v", logits)
	}
	if logits.F32[0] == logits.F32[3] && logits.F32[1] == logits.F32[4] {
		t.Fatalf("different inputs gave identical logits: %v", logits.F32)
	}
}

func TestRunChecksInputs(t *testing.T) {
	rt := runtimeForTest(t)
	s, err := rt.NewSession(fixture(t, "classify", "onnx", "model.onnx"), SessionOptions{Threads: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer closeSession(t, s)
	_, err = s.Run(context.Background(), map[string]*Tensor{
		"input_ids":      NewFloat32([]float32{1, 2}, 1, 2),
		"attention_mask": NewInt64([]int64{1, 1, 1}, 1, 2),
		"bogus":          NewInt64([]int64{1}, 1),
	})
	if err == nil {
		t.Fatal("bad inputs accepted")
	}
	for _, want := range []string{`"input_ids" is float32, the model wants int64`, `missing input "token_type_ids"`,
		`"attention_mask": shape [1 2] needs 2 elements, got 3`, `no input "bogus"`} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error lacks %q: %v", want, err)
		}
	}
}

func TestRunCancelled(t *testing.T) {
	rt := runtimeForTest(t)
	s, err := rt.NewSession(fixture(t, "classify", "onnx", "model.onnx"), SessionOptions{Threads: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer closeSession(t, s)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err = s.Run(ctx, map[string]*Tensor{
		"input_ids":      NewInt64([]int64{2, 3}, 1, 2),
		"attention_mask": NewInt64([]int64{1, 1}, 1, 2),
		"token_type_ids": NewInt64([]int64{0, 0}, 1, 2),
	})
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("err = %v", err)
	}
}

func TestCUDAFallsBackToCPU(t *testing.T) {
	rt := runtimeForTest(t)
	var logs bytes.Buffer
	s, err := rt.NewSession(fixture(t, "classify", "onnx", "model.onnx"), SessionOptions{
		Threads: 1, UseCUDA: true, Logger: slog.New(slog.NewTextHandler(&logs, nil)),
	})
	if err != nil {
		t.Fatalf("CUDA requested: the session must fall back to CPU, got %v", err)
	}
	defer closeSession(t, s)
	// The bootstrapped library is ONNX Runtime's CPU build: the CUDA provider cannot load.
	if s.Device() != DeviceCPU {
		t.Fatalf("device = %q, want cpu", s.Device())
	}
	if !strings.Contains(s.FallbackReason(), "CUDA") {
		t.Fatalf("fallback reason = %q", s.FallbackReason())
	}
	t.Logf("fallback reason: %s", s.FallbackReason())
	if !strings.Contains(logs.String(), "running on CPU") {
		t.Fatalf("fallback not logged: %s", logs.String())
	}
	if _, err := s.Run(context.Background(), map[string]*Tensor{
		"input_ids":      NewInt64([]int64{2, 3}, 1, 2),
		"attention_mask": NewInt64([]int64{1, 1}, 1, 2),
		"token_type_ids": NewInt64([]int64{0, 0}, 1, 2),
	}); err != nil {
		t.Fatalf("fallback session does not run: %v", err)
	}
}

func TestCorruptAndMissingModel(t *testing.T) {
	rt := runtimeForTest(t)
	dir := t.TempDir()
	bad := filepath.Join(dir, "model.onnx")
	if err := os.WriteFile(bad, []byte("this is not a protobuf \x00\x01\x02"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := rt.NewSession(bad, SessionOptions{}); err == nil || !strings.Contains(err.Error(), "not a loadable ONNX model") {
		t.Fatalf("corrupt model: %v", err)
	}
	if _, err := rt.NewSession(filepath.Join(dir, "absent.onnx"), SessionOptions{}); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("missing model: %v", err)
	}
}

func TestOutputSelectionAndEmptyTensors(t *testing.T) {
	rt := runtimeForTest(t)
	path := fixture(t, "summarize", "onnx", "decoder_model_merged.onnx")
	if _, err := rt.NewSession(path, SessionOptions{Outputs: []string{"nope"}}); err == nil || !strings.Contains(err.Error(), `no output "nope"`) {
		t.Fatalf("unknown output: %v", err)
	}
	s, err := rt.NewSession(path, SessionOptions{Threads: 1, Outputs: []string{"logits", "present.0.decoder.key"}})
	if err != nil {
		t.Fatal(err)
	}
	defer closeSession(t, s)
	in := map[string]*Tensor{
		"input_ids":              NewInt64([]int64{2}, 1, 1),
		"encoder_attention_mask": NewInt64([]int64{1, 1}, 1, 2),
		"encoder_hidden_states":  NewFloat32(make([]float32, 64), 1, 2, 32),
		"use_cache_branch":       NewBool([]bool{false}, 1),
	}
	for _, info := range s.Inputs() {
		if strings.HasPrefix(info.Name, "past_key_values.") {
			in[info.Name] = NewFloat32(nil, 1, info.Shape[1], 0, info.Shape[3])
		}
	}
	out, err := s.Run(context.Background(), in)
	if err != nil {
		t.Fatal(err)
	}
	if len(out) != 2 {
		t.Fatalf("got %d outputs", len(out))
	}
	if k := out["present.0.decoder.key"]; k == nil || k.Shape[2] != 1 {
		t.Fatalf("present key = %+v", k)
	}
}

func closeSession(t *testing.T, s *Session) {
	t.Helper()
	if err := s.Close(); err != nil {
		t.Error(err)
	}
	if err := s.Close(); err != nil {
		t.Errorf("second Close: %v", err)
	}
}

func TestRunAfterCloseAndConcurrentRuns(t *testing.T) {
	rt := runtimeForTest(t)
	s, err := rt.NewSession(fixture(t, "classify", "onnx", "model.onnx"), SessionOptions{Threads: 1})
	if err != nil {
		t.Fatal(err)
	}
	in := func() map[string]*Tensor {
		return map[string]*Tensor{
			"input_ids":      NewInt64([]int64{2, 50, 3}, 1, 3),
			"attention_mask": NewInt64([]int64{1, 1, 1}, 1, 3),
			"token_type_ids": NewInt64([]int64{0, 0, 0}, 1, 3),
		}
	}
	want, err := s.Run(context.Background(), in())
	if err != nil {
		t.Fatal(err)
	}
	errs := make(chan error, 8)
	for range 8 {
		go func() {
			got, err := s.Run(context.Background(), in())
			if err == nil && got["logits"].F32[0] != want["logits"].F32[0] {
				err = errors.New("concurrent run gave different logits")
			}
			errs <- err
		}()
	}
	for range 8 {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	closeSession(t, s)
	if _, err := s.Run(context.Background(), in()); !errors.Is(err, ErrClosed) {
		t.Fatalf("run after close: %v", err)
	}
}
