package main

import (
	"bytes"
	"context"
	"log/slog"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/modeld/modeld/cache"
	"github.com/modeld/modeld/cache/placement"
	"github.com/modeld/modeld/internal/ggufgen"
	"github.com/modeld/modeld/probe"
)

// deviceVocabulary is modeld's one device vocabulary, written out here
// (not taken from probe) so that the test holds the producers to it.
var deviceVocabulary = regexp.MustCompile(`^(cpu|cuda:\d+|vulkan:\d+|metal:0)$`)

// TestDeviceNamesOneVocabulary: every producer of a device name below the
// HTTP layer — the probe's GPU list (CUDA, Vulkan with a software device,
// a Mac with two Metal GPUs), placement of GGUF and ONNX models onto each
// GPU and onto the CPU, the cache's VRAM budgets, `modeld probe`'s DEVICE column, ps's PROCESSOR column and
// the GPU-fallback section of /v1/system — names devices only as cpu,
// cuda:N, vulkan:N or metal:0.
func TestDeviceNamesOneVocabulary(t *testing.T) {
	if got := probe.DevicePattern(); got != deviceVocabulary.String() {
		t.Errorf("probe's vocabulary %s, want %s", got, deviceVocabulary)
	}
	gpu := func(k probe.Kind, name, typ string, total uint64) probe.GPU {
		return probe.GPU{Kind: k, Name: name, Type: typ, TotalBytes: total}
	}
	machines := map[string]probe.Readings{
		"linux": {GOOS: "linux", AllowSoftware: true,
			GGML: map[probe.Kind]bool{probe.CUDA: true, probe.Vulkan: true},
			GPU: map[probe.Kind]probe.GPUReading{
				probe.CUDA:   {Devices: []probe.GPU{gpu("", "A", "discrete", 8<<30), gpu("", "B", "discrete", 24<<30)}},
				probe.Vulkan: {Devices: []probe.GPU{gpu("", "llvmpipe", "cpu", 2<<30), gpu("", "Radeon", "discrete", 16<<30)}},
				probe.Metal:  {Unsupported: true},
			}},
		"darwin": {GOOS: "darwin",
			GPU: map[probe.Kind]probe.GPUReading{
				probe.Metal:  {Devices: []probe.GPU{gpu("", "Intel UHD", "integrated", 8<<30), gpu("", "Radeon Pro", "discrete", 8<<30)}},
				probe.CUDA:   {Unsupported: true},
				probe.Vulkan: {Unsupported: true},
			}},
	}
	ggufPath := filepath.Join(t.TempDir(), "m.gguf")
	if err := ggufgen.WriteFile(ggufPath, ggufgen.Options{Embd: 64, Layers: 2, Heads: 4, HeadsKV: 2, Context: 512}); err != nil {
		t.Fatal(err)
	}
	models := []placement.Model{
		{ID: "chat", Task: "chat", Format: placement.GGUF, Path: ggufPath, ContextSize: 512, Slots: 1, BatchSize: 64},
		{ID: "embed", Task: "embed", Format: placement.ONNX, Size: 1 << 20},
	}
	var names []string // "producer: name"
	add := func(from, name string) { names = append(names, from+": "+name) }
	for host, r := range machines {
		info := probe.Decide(r)
		if n := len(info.Devices(probe.Metal)); n > 1 {
			t.Errorf("%s: %d Metal devices, want the one ggml runs on", host, n)
		}
		var out bytes.Buffer
		printProbe(&out, info, nil)
		_, table, _ := strings.Cut(out.String(), "DEVICE ")
		for _, line := range strings.Split(table, "\n")[1:] {
			f := strings.Fields(line)
			if len(f) == 0 {
				break // the end of the device table
			}
			add(host+" modeld probe", f[0])
		}
		_, vram := placement.Budgets(info, 0, 0)
		for dev := range vram {
			add(host+" VRAM budgets (the cache's accounts)", dev)
		}
		for _, g := range info.GPUs {
			add(host+" probe", g.ID())
			// Place every model onto this GPU alone: the others get no
			// VRAM budget.
			budgets := map[string]int64{}
			for _, o := range info.GPUs {
				if o.ID() != g.ID() {
					budgets[o.ID()] = 0
				}
			}
			for _, tasks := range [][]string{{"chat", "embed"}, nil} {
				p := placement.New(placement.Config{Info: info, GPUTasks: tasks, VRAM: budgets,
					FreeVRAM: func(probe.GPU) (uint64, bool, error) { return 0, false, nil }, Log: slog.New(slog.DiscardHandler)})
				for _, m := range models {
					plan, err := p.Place(context.Background(), m)
					if err != nil {
						t.Fatalf("%s: place %s: %v", host, m.ID, err)
					}
					add(host+" placement of "+m.ID, plan.Device)
					add(host+" ps", processorDevice(processor(cache.ModelStatus{Device: plan.Device, GPUShare: plan.Share})))
					add(host+" ps (split)", processorDevice(processor(cache.ModelStatus{Device: plan.Device, GPUShare: 0.4})))
					if plan.Device != probe.DeviceCPU {
						f := &gpuFallbacks{}
						f.set(m.ID, plan.Device, "the test's fallback")
						for _, fb := range f.snapshot().(map[string]gpuFallback) {
							add(host+" /v1/system gpu_fallbacks", fb.Device)
						}
					}
				}
			}
		}
	}
	seen := map[string]bool{}
	for _, n := range names {
		from, name, _ := strings.Cut(n, ": ")
		seen[name] = true
		if !deviceVocabulary.MatchString(name) || !probe.ValidDevice(name) {
			t.Errorf("%s names a device %q", from, name)
		}
	}
	for _, want := range []string{"cpu", "cuda:0", "cuda:1", "vulkan:0", "vulkan:1", "metal:0"} {
		if !seen[want] {
			t.Errorf("no producer named %s; names: %v", want, slices.Sorted(func(yield func(string) bool) {
				for k := range seen {
					if !yield(k) {
						return
					}
				}
			}))
		}
	}
}

// processorDevice is the device of ps's PROCESSOR column ("cpu",
// "100% cuda:0", "40%/60% cpu/cuda:0").
func processorDevice(s string) string {
	if _, dev, ok := strings.Cut(s, "cpu/"); ok {
		return dev
	}
	if dev, ok := strings.CutPrefix(s, "100% "); ok {
		return dev
	}
	return s
}
