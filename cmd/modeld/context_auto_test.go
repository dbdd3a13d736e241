package main

import (
	"bytes"
	"context"
	"log/slog"
	"path/filepath"
	"strings"
	"testing"

	"github.com/modeld/modeld/internal/ggufgen"
	"github.com/modeld/modeld/models"
	"github.com/modeld/modeld/probe"
)

// TestAutoContextIsTheTrainedContextCappedByMemory resolves a chat model
// trained on 128k tokens whose KV cache dominates its memory: with room it
// gets its whole trained context, under a tight RAM budget the largest
// halving of it that fits, never a fixed small default; the daemon logs the
// choice.
func TestAutoContextIsTheTrainedContextCappedByMemory(t *testing.T) {
	st, err := models.Open(filepath.Join(t.TempDir(), "models"), models.Options{})
	if err != nil {
		t.Fatal(err)
	}
	o := ggufgen.Tiny(ggufgen.SPM)
	o.Embd, o.Layers, o.Heads, o.Context = 256, 8, 4, 131072
	gguf := filepath.Join(t.TempDir(), "long.gguf")
	if err := ggufgen.WriteFile(gguf, o); err != nil {
		t.Fatal(err)
	}
	if _, err := st.Import(context.Background(), gguf, models.ImportOptions{Name: "t/long"}, nil); err != nil {
		t.Fatal(err)
	}
	noGPU := probe.Decide(probe.Readings{GOOS: "linux", Memory: probe.MemoryInfo{TotalBytes: 64 << 30}})
	resolve := func(budget int64, fixed int) (int, int64, string) {
		var logs bytes.Buffer
		cfg := Config{Home: t.TempDir(), ChatSlots: 4, RAMBudget: budget, ContextSize: fixed}
		rt := newRuntime(cfg, slog.New(slog.NewTextHandler(&logs, nil)), st, noGPU, nil)
		spec, err := rt.resolve(context.Background(), "t/long")
		if err != nil {
			t.Fatal(err)
		}
		return spec.Context, spec.RAM, logs.String()
	}
	whole, ram, log := resolve(0, 0)
	if whole != 131072 {
		t.Fatalf("with 80%% of 64 GiB: context %d, want the trained 131072", whole)
	}
	if !strings.Contains(log, `msg="chat context chosen" model=t/long context=131072 trained=131072`) {
		t.Fatalf("no log of the choice:\n%s", log)
	}
	capped, cappedRAM, log := resolve(ram/3, 0)
	if capped >= whole || capped < minAutoContext || cappedRAM > ram/3 {
		t.Fatalf("budget %d: context %d (%d bytes), want a halving of 131072 that fits", ram/3, capped, cappedRAM)
	}
	if _, twice, _ := resolve(0, capped*2); twice <= ram/3 {
		t.Fatalf("context %d would fit too (%d bytes under %d): auto did not keep the largest", capped*2, twice, ram/3)
	}
	if !strings.Contains(log, "halved from the trained context") {
		t.Fatalf("the log does not say why:\n%s", log)
	}
	t.Logf("128k model: %d bytes at the trained context; %d tokens under a budget of %d", ram, capped, ram/3)
}
