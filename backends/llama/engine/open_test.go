package engine

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/modeld/modeld/internal/ggufgen"
)

func TestOpenCorruptFiles(t *testing.T) {
	initLib(t)
	var model bytes.Buffer
	if err := ggufgen.Write(&model, ggufgen.Tiny(ggufgen.SPM)); err != nil {
		t.Fatal(err)
	}
	good := model.Bytes()
	garbage := bytes.Repeat([]byte("not a model, just words "), 4000)
	files := map[string][]byte{
		"empty":             nil,
		"garbage":           garbage,
		"magic then junk":   append([]byte("GGUF"), garbage...),
		"truncated header":  good[:200],
		"truncated tensors": good[:len(good)/2],
		"one byte short":    good[:len(good)-1],
	}
	dir := t.TempDir()
	for name, data := range files {
		t.Run(name, func(t *testing.T) {
			path := filepath.Join(dir, strings.ReplaceAll(name, " ", "-")+".gguf")
			if err := os.WriteFile(path, data, 0o644); err != nil {
				t.Fatal(err)
			}
			m, err := Open(path, Options{Slots: 1, ContextSize: 128})
			if err == nil {
				m.Close()
				t.Fatal("Open succeeded")
			}
			t.Log(err)
			if !errors.Is(err, ErrInvalidModel) || !strings.Contains(err.Error(), path) {
				t.Errorf("err = %v, want ErrInvalidModel naming the file", err)
			}
		})
	}
	if _, err := Open(filepath.Join(dir, "absent.gguf"), Options{}); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("absent file: err = %v", err)
	}
	if _, err := Open(dir, Options{}); !errors.Is(err, ErrInvalidModel) {
		t.Errorf("directory: err = %v", err)
	}
	// The process is fine: a good model still loads and generates.
	m := openModel(t, ggufgen.Tiny(ggufgen.SPM), Options{Slots: 1})
	if r := generate(t, m, Request{Prompt: tokenize(t, m, "hello"), MaxTokens: 3}); len(r.tokens) != 3 {
		t.Errorf("after the corrupt files: %d tokens", len(r.tokens))
	}
}

func TestInfo(t *testing.T) {
	o := ggufgen.Tiny(ggufgen.BPE)
	o.Context = 1024
	initLib(t)
	path := genModel(t, o)
	open := func(opts Options) Info {
		t.Helper()
		m, err := Open(path, opts)
		if err != nil {
			t.Fatal(err)
		}
		defer m.Close()
		return m.Info()
	}
	info := open(Options{Slots: 2})
	if info.ContextSize != 1024 || info.TrainedContext != 1024 {
		t.Errorf("context %d (trained %d), want the trained 1024 under the default cap", info.ContextSize, info.TrainedContext)
	}
	if info.Arch != "llama" || info.VocabType != "bpe" || info.VocabSize < 500 || !info.HasChatTemplate() {
		t.Errorf("info %+v", info)
	}
	if info.Slots != 2 || info.Threads != DefaultThreads() || info.BatchThreads != DefaultBatchThreads() || info.BatchSize != DefaultBatchSize || info.GPULayers != 0 {
		t.Errorf("info %+v does not show the defaults", info)
	}
	if info.Params == 0 || info.SizeBytes == 0 || info.FileType == "" || info.Name != "modeld-test-bpe" {
		t.Errorf("info %+v lacks the file facts", info)
	}
	if got := open(Options{Slots: 1, ContextCap: 256}).ContextSize; got != 256 {
		t.Errorf("context with cap 256: %d", got)
	}
	if got := open(Options{Slots: 1, ContextSize: 300}).ContextSize; got != 300 {
		t.Errorf("explicit context 300: %d", got)
	}
	if _, err := Open(path, Options{Slots: -1, Threads: -2}); err == nil ||
		!strings.Contains(err.Error(), "slots") || !strings.Contains(err.Error(), "threads") {
		t.Errorf("bad options: err = %v, want both problems named", err)
	}
}

func TestLibrary(t *testing.T) {
	initLib(t)
	if v := LibVersion(); !strings.HasPrefix(v, "v") {
		t.Errorf("LibVersion() = %q", v)
	}
	if SystemInfo() == "" {
		t.Error("SystemInfo() is empty")
	}
	devs := Devices()
	if len(devs) == 0 || devs[0].Type != "CPU" && !HasGPU() {
		t.Errorf("devices %+v", devs)
	}
	if err := Init(t.TempDir()); err == nil {
		t.Error("Init from a second directory succeeded")
	}
	err := checkLibDir(t.TempDir())
	if err == nil || !strings.Contains(err.Error(), "libllama.so") || !strings.Contains(err.Error(), "scripts/bootstrap") {
		t.Errorf("empty lib dir: err = %v, want libllama.so and scripts/bootstrap named", err)
	}
}

func TestDefaultThreads(t *testing.T) {
	cases := []struct{ cpus, perf, single, batch int }{
		{1, 1, 1, 1}, {2, 1, 1, 2}, {2, 2, 1, 2}, {8, 4, 4, 4}, {16, 8, 8, 8}, {4, 0, 1, 1},
	}
	for _, c := range cases {
		if got := defaultThreads(c.cpus, c.perf); got != c.single {
			t.Errorf("defaultThreads(%d, %d) = %d, want %d", c.cpus, c.perf, got, c.single)
		}
		if got := defaultBatchThreads(c.cpus, c.perf); got != c.batch {
			t.Errorf("defaultBatchThreads(%d, %d) = %d, want %d", c.cpus, c.perf, got, c.batch)
		}
	}
}
