package placement_test

import (
	"context"
	"fmt"
	"log/slog"
	"math"
	"path/filepath"
	"regexp"
	"strconv"
	"sync"
	"testing"

	"github.com/modeld/modeld/backends/llama/engine"
	"github.com/modeld/modeld/cache/placement"
	"github.com/modeld/modeld/internal/ggufgen"
	"github.com/modeld/modeld/internal/testenv"
	"github.com/modeld/modeld/probe"
)

// llamaLog collects llama.cpp's log lines, which the engine sends to slog.
type llamaLog struct {
	mu    sync.Mutex
	lines []string
}

func (l *llamaLog) Enabled(context.Context, slog.Level) bool { return true }
func (l *llamaLog) Handle(_ context.Context, r slog.Record) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.lines = append(l.lines, r.Message)
	return nil
}
func (l *llamaLog) WithAttrs([]slog.Attr) slog.Handler { return l }
func (l *llamaLog) WithGroup(string) slog.Handler      { return l }

func (l *llamaLog) take() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := l.lines
	l.lines = nil
	return out
}

// What llama.cpp reports of its KV cache and model buffer when a context is made.
var (
	kvLine      = regexp.MustCompile(`llama_kv_cache: size = +([0-9.]+) MiB \( *(\d+) cells, +(\d+) layers, +(\d+)/(\d+) seqs\), K \(f16\): +([0-9.]+) MiB, V \(f16\): +([0-9.]+) MiB`)
	weightsLine = regexp.MustCompile(`CPU_Mapped model buffer size = +([0-9.]+) MiB`)
	computeLine = regexp.MustCompile(`sched_reserve: +CPU compute buffer size = +([0-9.]+) MiB`)
)

// reported is what llama.cpp said about one loaded model, in MiB.
type reported struct {
	kv, k, v, weights, compute float64
	cells, seqs                int
}

func parseReport(t *testing.T, lines []string) reported {
	t.Helper()
	var r reported
	found := 0
	for _, l := range lines {
		if m := kvLine.FindStringSubmatch(l); m != nil {
			r.kv, r.k, r.v = num(m[1]), num(m[6]), num(m[7])
			r.cells, _ = strconv.Atoi(m[2])
			r.seqs, _ = strconv.Atoi(m[5])
			found++
		}
		if m := weightsLine.FindStringSubmatch(l); m != nil {
			r.weights = num(m[1])
			found++
		}
		if m := computeLine.FindStringSubmatch(l); m != nil {
			r.compute = num(m[1])
			found++
		}
	}
	if found != 3 {
		t.Fatalf("llama.cpp's log lacks the KV cache, model buffer or compute buffer line:\n%q", lines)
	}
	return r
}

func num(s string) float64 {
	f, err := strconv.ParseFloat(s, 64)
	if err != nil {
		panic(err)
	}
	return f
}

func mib(n int64) float64 { return float64(n) / (1 << 20) }

// The KV cache placement estimates for a model, its context and its slots
// is the one llama.cpp allocates when the engine loads it with the same
// settings, with and without grouped-query attention; the weights match the
// model buffer, the compute estimate is close to the compute buffer, and the
// whole RAM estimate is not below the buffers llama.cpp allocates.
// The old estimate (2 * 2 bytes * layers * tokens * embedding width) was
// right only for plain multi-head attention: it is 4x too big at 4:1 GQA
// and 8x at 8:1.
func TestGGUFEstimateMatchesLlamaCpp(t *testing.T) {
	if err := engine.Init(testenv.LlamaDir(t)); err != nil {
		t.Fatal(err)
	}
	logs := &llamaLog{}
	prev := slog.Default()
	slog.SetDefault(slog.New(logs))
	t.Cleanup(func() { slog.SetDefault(prev) })

	shapes := []struct {
		name string
		o    ggufgen.Options
	}{
		{"MHA", ggufgen.Options{Embd: 256, Layers: 4, Heads: 8, HeadsKV: 8, Context: 8192}},
		{"GQA 4:1", ggufgen.Options{Embd: 256, Layers: 4, Heads: 8, HeadsKV: 2, Context: 8192}},
		{"GQA 8:1 F16", ggufgen.Options{Embd: 512, Layers: 3, Heads: 16, HeadsKV: 2, Context: 8192, Type: ggufgen.F16}},
	}
	noGPU := placement.New(placement.Config{Info: probe.Decide(probe.Readings{GOOS: "linux"}), Log: slog.New(slog.DiscardHandler)})
	for _, sh := range shapes {
		path := filepath.Join(t.TempDir(), "model.gguf")
		if err := ggufgen.WriteFile(path, sh.o); err != nil {
			t.Fatal(err)
		}
		for _, ctx := range []int{300, 1024, 4096} {
			for _, slots := range []int{1, 3, 4} {
				t.Run(fmt.Sprintf("%s/ctx=%d/slots=%d", sh.name, ctx, slots), func(t *testing.T) {
					plan, err := noGPU.Place(context.Background(), placement.Model{
						ID: "m", Task: "chat", Format: placement.GGUF, Path: path, Digest: "sha256:" + sh.name,
						ContextSize: ctx, Slots: slots, BatchSize: engine.DefaultBatchSize,
					})
					if err != nil {
						t.Fatal(err)
					}
					logs.take()
					m, err := engine.Open(path, engine.Options{ContextSize: ctx, Slots: slots})
					if err != nil {
						t.Fatal(err)
					}
					if err := m.Close(); err != nil {
						t.Fatal(err)
					}
					got := parseReport(t, logs.take())
					est := plan.Estimate
					t.Logf("estimate %v; llama.cpp KV %.2f MiB, weights %.2f MiB, compute %.2f MiB", est.RAM.LogValue(), got.kv, got.weights, got.compute)

					if plan.Device != "cpu" || plan.RAM != est.RAM.Total() || plan.VRAM != 0 || plan.GPULayers != 0 {
						t.Fatalf("plan = %+v, want the CPU with the estimate's RAM", plan)
					}
					if got.cells*got.seqs != est.ContextCells || got.seqs != slots {
						t.Errorf("llama.cpp made %d cells x %d seqs, the estimate counts %d cells for %d slots", got.cells, got.seqs, est.ContextCells, slots)
					}
					// llama.cpp prints MiB with two decimals.
					if d := math.Abs(mib(est.RAM.KV) - got.kv); d > 0.006 {
						t.Errorf("KV estimate %.3f MiB, llama.cpp %.2f MiB", mib(est.RAM.KV), got.kv)
					}
					if d := math.Abs(mib(est.RAM.KV)/2 - got.k); d > 0.006 {
						t.Errorf("K estimate %.3f MiB, llama.cpp %.2f MiB", mib(est.RAM.KV)/2, got.k)
					}
					if d := math.Abs(mib(est.RAM.Weights) - got.weights); d > 0.006 {
						t.Errorf("weights estimate %.3f MiB, llama.cpp's model buffer %.2f MiB", mib(est.RAM.Weights), got.weights)
					}
					// The compute estimate is gguf-parser's model of llama.cpp's graph:
					// close, not exact (up to 8% below on the smallest F16 shape here).
					if c := mib(est.RAM.Compute); c < 0.85*got.compute {
						t.Errorf("compute estimate %.2f MiB is more than 15%% below llama.cpp's compute buffer %.2f MiB", c, got.compute)
					}
					if sum := got.weights + got.kv + got.compute; mib(est.RAM.Total()) < sum {
						t.Errorf("RAM estimate %.2f MiB is below llama.cpp's buffers (%.2f MiB)", mib(est.RAM.Total()), sum)
					}
					old := 2 * 2 * int64(sh.o.Layers) * int64(ctx*slots) * int64(sh.o.Embd)
					wantRatio := float64(sh.o.Heads / sh.o.HeadsKV)
					if r := float64(old) / float64(est.RAM.KV); math.Abs(r-wantRatio*float64(ctx*slots)/float64(est.ContextCells)) > 0.01 {
						t.Errorf("old estimate / new = %.2f, want %.0f (heads / KV heads) less the padding", r, wantRatio)
					}
				})
			}
		}
	}
}
