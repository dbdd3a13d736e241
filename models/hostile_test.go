package models

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/modeld/modeld/internal/ggufgen"
)

// hostileGGUFs is the table of hostile GGUF files plus prefixes of a real
// tiny model cut at many offsets (header, metadata, vocabulary, tensor
// infos, data).
func hostileGGUFs(t *testing.T) []ggufgen.Hostile {
	t.Helper()
	files := ggufgen.HostileFiles()
	good := tinyGGUF(t)
	for _, cut := range []int{1, 4, 7, 8, 15, 16, 23, 24, 31, 40, 64, 100, 333, 1000, 2048, 4096, 8191, 10000, 20000, 50000, len(good) / 3, len(good) / 2, len(good) - 33, len(good) - 1} {
		if cut < len(good) {
			files = append(files, ggufgen.Hostile{Name: "truncated at " + strconv.Itoa(cut), Want: "", Data: good[:cut]})
		}
	}
	return files
}

// Every hostile GGUF is refused by import with a clear error naming the file
// and the fault, the process survives (the 10^6-deep nesting used to overflow
// the stack), and the store holds nothing afterwards.
func TestImportRefusesHostileGGUF(t *testing.T) {
	s := newTestStore(t)
	dir := t.TempDir()
	for i, h := range hostileGGUFs(t) {
		t.Run(h.Name, func(t *testing.T) {
			src := filepath.Join(dir, "hostile-"+strconv.Itoa(i)+".gguf")
			writeFile(t, src, h.Data)
			_, err := s.Import(context.Background(), src, ImportOptions{Name: "evil/model"}, nil)
			if !errors.Is(err, ErrInvalidModel) {
				t.Fatalf("import = %v, want ErrInvalidModel", err)
			}
			msg := err.Error()
			if !strings.Contains(msg, filepath.Base(src)) || !strings.Contains(msg, h.Want) {
				t.Fatalf("error %q does not name the file and say %q", msg, h.Want)
			}
			if len(msg) > 600 {
				t.Errorf("error of %d bytes", len(msg))
			}
		})
	}
	if files := contentFiles(t, s.Root()); len(files) != 0 {
		t.Errorf("store holds %v after refused imports", files)
	}
	if ms, err := s.List(); err != nil || len(ms) != 0 {
		t.Errorf("List = %v, %v after refused imports", ms, err)
	}
	// The same store still imports a good model.
	src := filepath.Join(dir, "good.gguf")
	writeFile(t, src, tinyGGUF(t))
	if _, err := s.Import(context.Background(), src, ImportOptions{Name: "good"}, nil); err != nil {
		t.Fatalf("good model after the hostile ones: %v", err)
	}
}

// Pull runs the same check on what it fetched: a hostile GGUF on the hub is
// refused and no manifest is written.
func TestPullRefusesHostileGGUF(t *testing.T) {
	e := newPullEnv(t, nil)
	var cases []ggufgen.Hostile
	for _, h := range ggufgen.HostileFiles() {
		switch h.Name {
		case "nested arrays 10^6 deep", "array length 2^62", "tensor count 2^62", "offset past the end", "data cut short":
			cases = append(cases, h)
		}
	}
	if len(cases) != 5 {
		t.Fatalf("%d cases", len(cases))
	}
	for i, h := range cases {
		t.Run(h.Name, func(t *testing.T) {
			repo := "evil/Bad" + strconv.Itoa(i) + "-GGUF"
			e.h.addRepo(repo, map[string][]byte{"bad-Q4_K_M.gguf": h.Data})
			_, err := e.p.Pull(context.Background(), "hf:"+repo, PullOptions{}, nil)
			if !errors.Is(err, ErrInvalidModel) || !strings.Contains(err.Error(), "bad-Q4_K_M.gguf") || !strings.Contains(err.Error(), h.Want) {
				t.Fatalf("pull = %v, want ErrInvalidModel naming the file and saying %q", err, h.Want)
			}
		})
	}
	if ms, err := e.s.List(); err != nil || len(ms) != 0 {
		t.Errorf("List = %v, %v after refused pulls", ms, err)
	}
}

func FuzzReadGGUF(f *testing.F) {
	f.Add(ggufgen.ValidTiny())
	for _, h := range ggufgen.HostileFiles() {
		if len(h.Data) < 1<<16 {
			f.Add(h.Data)
		}
	}
	dir := f.TempDir()
	f.Fuzz(func(t *testing.T, b []byte) {
		p := filepath.Join(dir, "f.gguf")
		if err := os.WriteFile(p, b, 0o644); err != nil {
			t.Fatal(err)
		}
		info, err := readGGUF(p, "f.gguf")
		if err != nil {
			if !errors.Is(err, ErrInvalidModel) {
				t.Fatalf("error %v is not ErrInvalidModel", err)
			}
			return
		}
		if info.Architecture == "" {
			t.Fatal("accepted without an architecture")
		}
	})
}
