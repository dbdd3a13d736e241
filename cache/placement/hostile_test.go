package placement

import (
	"context"
	"errors"
	"math"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/modeld/modeld/internal/ggufgen"
	"github.com/modeld/modeld/internal/ggufscan"
)

// A store written by an older modeld may hold a model whose header the scan
// now refuses: the 4-byte edit llama.block_count = 2^32-1 made the metadata
// parser allocate until the daemon died ("fatal error: out of memory").
// Placement scans first, so every such file is an *InvalidModelError (422,
// naming the bound), the parser never sees it, and the refusal is cached by
// digest.
func TestPlaceRefusesHostileHeaderBeforeParsing(t *testing.T) {
	good := testModel(t, 2)
	data, err := os.ReadFile(good.Path)
	if err != nil {
		t.Fatal(err)
	}
	p := (&fakeGPUs{}).planner(machine(), nil)
	if _, err := p.Place(context.Background(), good); err != nil {
		t.Fatalf("the unedited model: %v", err)
	}
	for _, v := range []uint32{1 << 20, math.MaxUint32} {
		bad, err := ggufgen.EditU32(data, "llama.block_count", v)
		if err != nil {
			t.Fatal(err)
		}
		m := good
		m.Path = filepath.Join(t.TempDir(), "edited.gguf")
		m.Digest = "sha256:edited" + string(rune('a'+v%26))
		if err := os.WriteFile(m.Path, bad, 0o644); err != nil {
			t.Fatal(err)
		}
		for range 2 { // the second answer comes from the cache
			_, err = p.Place(context.Background(), m)
			var ie *InvalidModelError
			if !errors.As(err, &ie) || !errors.Is(err, ggufscan.ErrInvalid) {
				t.Fatalf("block_count %d: Place = %v, want an *InvalidModelError", v, err)
			}
			if ie.HTTPStatus() != http.StatusUnprocessableEntity || ie.ErrorCode() != "invalid_model" {
				t.Fatalf("status %d, code %q", ie.HTTPStatus(), ie.ErrorCode())
			}
			for _, want := range []string{"llama.block_count", "limit of 512", "modeld rm", m.Path} {
				if !strings.Contains(err.Error(), want) {
					t.Fatalf("error %q does not say %q", err, want)
				}
			}
		}
	}
}

// A broken file is refused for what is wrong with it even when the context
// its manifest recorded (2^32-1, unusable) leaves the caller with none.
func TestPlaceNamesTheFileFaultFirst(t *testing.T) {
	good := testModel(t, 2)
	data, err := os.ReadFile(good.Path)
	if err != nil {
		t.Fatal(err)
	}
	bad, err := ggufgen.EditU32(data, "llama.context_length", math.MaxUint32)
	if err != nil {
		t.Fatal(err)
	}
	m := good
	m.Path, m.ContextSize = filepath.Join(t.TempDir(), "ctx.gguf"), 0
	if err := os.WriteFile(m.Path, bad, 0o644); err != nil {
		t.Fatal(err)
	}
	_, err = (&fakeGPUs{}).planner(machine(), nil).Place(context.Background(), m)
	var ie *InvalidModelError
	if !errors.As(err, &ie) || !strings.Contains(err.Error(), `"llama.context_length" is 4294967295, more than the limit of 67108864`) {
		t.Fatalf("Place = %v", err)
	}
}

// Every file of the hostile table is refused by placement with an error, and
// the planner goes on placing good models.
func TestPlaceRefusesHostileTable(t *testing.T) {
	p := (&fakeGPUs{}).planner(machine(), nil)
	dir := t.TempDir()
	for _, h := range ggufgen.HostileFiles() {
		path := filepath.Join(dir, "h.gguf")
		if err := os.WriteFile(path, h.Data, 0o644); err != nil {
			t.Fatal(err)
		}
		m := Model{ID: "h", Task: "chat", Format: GGUF, Path: path, ContextSize: 512, Slots: 1, BatchSize: 32}
		if _, err := p.Place(context.Background(), m); err == nil {
			t.Errorf("%s: placed", h.Name)
		}
	}
	place(t, p, testModel(t, 2))
}

// The header cache keeps no long strings: a model's chat template (or a
// hostile file's megabytes of description) is not held once per cached file.
func TestHeaderCacheDropsLongStrings(t *testing.T) {
	path := filepath.Join(t.TempDir(), "tmpl.gguf")
	tmpl := strings.Repeat("{{ messages }}", 1<<17) // 1.75 MiB
	if err := ggufgen.WriteFile(path, ggufgen.Options{Embd: 64, Layers: 2, Heads: 4, HeadsKV: 2, Context: 512, Template: tmpl}); err != nil {
		t.Fatal(err)
	}
	var files ggufFiles
	gf, err := files.get(path, "sha256:tmpl")
	if err != nil {
		t.Fatal(err)
	}
	found := false
	for _, kv := range gf.Header.MetadataKV {
		if v, ok := kv.Value.(string); ok && len(v) > maxKeptString {
			t.Fatalf("%s kept %d bytes", kv.Key, len(v))
		}
		found = found || kv.Key == "tokenizer.chat_template"
	}
	if !found {
		t.Fatal("the template's key is gone")
	}
	if _, err := newGGUFShape(gf, 512, 1, 32); err != nil {
		t.Fatal(err)
	}
}
