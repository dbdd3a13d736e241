package llama

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/modeld/modeld/internal/ggufgen"
)

// TestRunnerLoadsNamedCPUVariant: a runner told the CPU variant (as the
// daemon's probe reads it) loads that library alone and keeps the variant
// that ggml's own choice among all of them keeps; a variant that is not in
// the library dir falls back to ggml's choice. The greedy tokens are the
// same all three ways.
func TestRunnerLoadsNamedCPUVariant(t *testing.T) {
	path := genModel(t, ggufgen.Tiny(ggufgen.BPE))
	opts := Options{Slots: 1, ContextSize: 256}
	type run struct {
		variants []string
		tokens   []int32
		log      string
	}
	start := func(variant string) run {
		t.Helper()
		var log syncBuffer
		ro := runnerOpts(t, path, opts)
		ro.CPUVariant, ro.LogLevel = variant, slog.LevelDebug
		ro.Logger = slog.New(slog.NewTextHandler(&log, &slog.HandlerOptions{Level: slog.LevelDebug}))
		r, err := StartRunner(context.Background(), ro)
		if err != nil {
			t.Fatal(err)
		}
		defer func() {
			if err := r.Close(); err != nil {
				t.Errorf("close runner: %v", err)
			}
		}()
		maps, err := os.ReadFile(fmt.Sprintf("/proc/%d/maps", r.PID()))
		if err != nil {
			t.Fatal(err)
		}
		prompt, err := r.Tokenize("Once upon a time", true, true)
		if err != nil {
			t.Fatal(err)
		}
		toks := eventTokens(collect(t, mustGenerate(t, r, Request{Prompt: prompt, MaxTokens: 16})))
		if err := r.Close(); err != nil {
			t.Errorf("close runner: %v", err)
		}
		return run{variants: mappedCPUVariants(string(maps)), tokens: toks, log: log.String()}
	}

	all := start("")
	if len(all.variants) != 1 {
		t.Fatalf("ggml's own choice left %q mapped; want one CPU variant", all.variants)
	}
	v := all.variants[0]
	if strings.Contains(all.log, "variant_alone=true") {
		t.Errorf("a runner told no variant loaded one alone:\n%s", all.log)
	}
	if len(all.tokens) != 16 {
		t.Fatalf("greedy gave %d tokens, want 16", len(all.tokens))
	}
	named := start(v)
	if !slices.Equal(named.variants, all.variants) {
		t.Errorf("told %q, the runner has %q mapped", v, named.variants)
	}
	if v != "native" && !strings.Contains(named.log, "variant_alone=true") {
		t.Errorf("told %q, the runner did not load it alone:\n%s", v, named.log)
	}
	if !slices.Equal(named.tokens, all.tokens) {
		t.Errorf("greedy tokens with the variant named %v, with ggml's choice %v", named.tokens, all.tokens)
	}
	absent := start("nosuchvariant")
	if !slices.Equal(absent.variants, all.variants) || strings.Contains(absent.log, "variant_alone=true") {
		t.Errorf("told a variant that is not there, the runner has %q mapped (want %q, ggml's choice):\n%s", absent.variants, all.variants, absent.log)
	}
	if !slices.Equal(absent.tokens, all.tokens) {
		t.Errorf("greedy tokens after the fallback %v, with ggml's choice %v", absent.tokens, all.tokens)
	}
}

var mappedCPULib = regexp.MustCompile(`^libggml-cpu(?:-([A-Za-z0-9_.]+?))?\.so$`)

// mappedCPUVariants are the ggml CPU variants among the libraries of a
// process's maps ("native" for a native build's libggml-cpu.so).
func mappedCPUVariants(maps string) []string {
	var out []string
	for _, line := range strings.Split(maps, "\n") {
		m := mappedCPULib.FindStringSubmatch(filepath.Base(strings.TrimSpace(line)))
		if m == nil {
			continue
		}
		v := m[1]
		if v == "" {
			v = "native"
		}
		if !slices.Contains(out, v) {
			out = append(out, v)
		}
	}
	return out
}

// syncBuffer is a bytes.Buffer for a logger that another goroutine writes.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}
