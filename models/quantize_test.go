package models

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestQuantizedName(t *testing.T) {
	for in, want := range map[string]string{
		"bench.gguf":                      "bench-Q4_K_M.gguf",
		"Qwen2.5-0.5B-Instruct-F16.gguf":  "Qwen2.5-0.5B-Instruct-Q4_K_M.gguf",
		"model.f32.gguf":                  "model-Q4_K_M.gguf",
		"Llama-3.2-1B-Instruct-BF16.GGUF": "Llama-3.2-1B-Instruct-Q4_K_M.gguf",
	} {
		if got := quantizedName(in, "Q4_K_M"); got != want {
			t.Errorf("quantizedName(%q) = %q, want %q", in, got, want)
		}
	}
}

// A quantizer that fails, is cancelled, or writes something that is not a
// GGUF model leaves the store as it was: no manifest, no blob, no partial.
func TestImportQuantizeFailuresLeaveNothing(t *testing.T) {
	data := tinyGGUF(t)
	src := filepath.Join(t.TempDir(), "tiny-F32.gguf")
	writeFile(t, src, data)
	for name, q := range map[string]Quantizer{
		"fails": func(_ context.Context, _, dst, _ string, _ func(int, int)) error {
			if err := os.WriteFile(dst, []byte("half"), 0o644); err != nil {
				return err
			}
			return errors.New("the quantizer died")
		},
		"cancelled": func(ctx context.Context, _, dst, _ string, _ func(int, int)) error {
			return errors.Join(os.WriteFile(dst, data, 0o644), context.Canceled)
		},
		"garbage output": func(_ context.Context, _, dst, _ string, _ func(int, int)) error {
			return os.WriteFile(dst, []byte("GGUF but not really"), 0o644)
		},
	} {
		t.Run(name, func(t *testing.T) {
			s := newTestStore(t)
			_, err := s.Import(context.Background(), src, ImportOptions{Name: "test/q", Quantize: "Q8_0", Quantizer: q}, nil)
			if err == nil {
				t.Fatal("import succeeded")
			}
			for _, dir := range []string{dirManifests, dirBlobs, dirPartials} {
				entries, _ := os.ReadDir(filepath.Join(s.root, dir))
				for _, e := range entries {
					if !strings.HasSuffix(e.Name(), ".lock") {
						t.Errorf("%s/%s left behind (%v)", dir, e.Name(), err)
					}
				}
			}
		})
	}
	// A quantizer that writes a valid model: stored under the type's name,
	// with its progress.
	s := newTestStore(t)
	var events []Progress
	m, err := s.Import(context.Background(), src, ImportOptions{Name: "test/q", Quantize: "q8_0",
		Quantizer: func(_ context.Context, in, dst, typ string, progress func(int, int)) error {
			if in != src || typ != "Q8_0" {
				return errors.New("wrong input or type")
			}
			progress(1, 2)
			progress(2, 2)
			return os.WriteFile(dst, data, 0o644)
		}}, func(p Progress) { events = append(events, p) })
	if err != nil {
		t.Fatal(err)
	}
	if m.Files[0].Path != "tiny-Q8_0.gguf" || m.Source.Quantized != "Q8_0" || m.GGUF.File != "tiny-Q8_0.gguf" {
		t.Errorf("manifest %+v", m)
	}
	var done int64
	for _, p := range events {
		if strings.HasPrefix(p.Status, StatusQuantizing) && p.Total > 0 {
			done = p.Completed
		}
	}
	if done != int64(len(data)) {
		t.Errorf("quantizing progress ended at %d of %d bytes: %+v", done, len(data), events)
	}
}
