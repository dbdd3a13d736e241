package main

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/modeld/modeld/internal/ggufgen"
	"github.com/modeld/modeld/models"
	"github.com/modeld/modeld/probe"
)

// TestResolveProjector: a chat model imported with its projector is
// planned with the projector's file in the store, which the llama backend
// is given; a model without one gets none.
func TestResolveProjector(t *testing.T) {
	noGPU := probe.Decide(probe.Readings{GOOS: "linux", Memory: probe.MemoryInfo{TotalBytes: 16 << 30}})
	rt := testRuntime(t, noGPU, Config{})
	dir := t.TempDir()
	model, proj := filepath.Join(dir, "vision.gguf"), filepath.Join(dir, "vision-mmproj.gguf")
	if err := ggufgen.WriteFile(model, ggufgen.Tiny(ggufgen.SPM)); err != nil {
		t.Fatal(err)
	}
	if err := ggufgen.WriteProjectorFile(proj, ggufgen.TinyProjector()); err != nil {
		t.Fatal(err)
	}
	if _, err := rt.store.Import(context.Background(), model, models.ImportOptions{Name: "t/vision", Projector: proj}, nil); err != nil {
		t.Fatal(err)
	}
	spec, err := rt.resolve(context.Background(), "t/vision")
	if err != nil {
		t.Fatal(err)
	}
	plan := spec.Data.(*loadPlan)
	want, _ := os.ReadFile(proj)
	got, err := os.ReadFile(plan.projector)
	if err != nil || string(got) != string(want) {
		t.Fatalf("planned projector %q (%v) is not the imported file", plan.projector, err)
	}
	spec, err = rt.resolve(context.Background(), "t/chat")
	if err != nil {
		t.Fatal(err)
	}
	if p := spec.Data.(*loadPlan).projector; p != "" {
		t.Fatalf("a text-only model is planned with projector %q", p)
	}
}
