package models

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/modeld/modeld/internal/ggufgen"
	"github.com/modeld/modeld/internal/ggufscan"
	"github.com/modeld/modeld/internal/testenv"
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

func FuzzReadGGUF(f *testing.F) {
	// The metadata of the 19 real vocabularies and the 68 real templates
	// (from the llama.cpp test assets; a missing asset dir fails).
	seeds, err := ggufgen.Seeds(testenv.LlamaAssets(f))
	if err != nil {
		f.Fatal(err)
	}
	for _, b := range seeds {
		f.Add(b)
	}
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
		// What the manifest records of an accepted file is within the
		// scan's bounds (a block count of 2^32-1 once went through).
		if info.BlockCount > ggufscan.DefaultMaxBlockCount || info.ContextLength > ggufscan.DefaultMaxContext ||
			info.EmbeddingLength > ggufscan.DefaultMaxEmbedding {
			t.Fatalf("accepted %+v", info)
		}
	})
}

// Hostile JSON files and graphs of an ONNX folder are refused by import with
// the file and the fault named, and nothing is added. The huge files are
// sparse: their size is refused before they are read.
func TestImportRefusesHostileONNX(t *testing.T) {
	deep := []byte(strings.Repeat("[", 1_000_000) + strings.Repeat("]", 1_000_000))
	graph := func(fields ...[]byte) []byte { return bytes.Join(fields, nil) }
	for _, tc := range []struct {
		name   string
		edit   func(dir string)
		reason string
	}{
		{"config.json nested 10^6 deep", func(dir string) { writeFile(t, filepath.Join(dir, "config.json"), deep) }, "exceeded max depth"},
		{"config.json too large", func(dir string) { sparse(t, filepath.Join(dir, "config.json"), maxConfigJSONBytes+1) }, "too large for a model config"},
		{"tokenizer.json nested 10^6 deep", func(dir string) { writeFile(t, filepath.Join(dir, "tokenizer.json"), deep) }, "exceeded max depth"},
		{"tokenizer.json too large", func(dir string) { sparse(t, filepath.Join(dir, "tokenizer.json"), maxTokenizerJSONBytes+1) }, "more than the 134217728"},
		{"tokenizer_config.json too large", func(dir string) { sparse(t, filepath.Join(dir, "tokenizer_config.json"), maxConfigJSONBytes+1) }, "more than the 16777216"},
		{"graph length past the end", func(dir string) {
			writeFile(t, filepath.Join(dir, "onnx/model.onnx"), graph([]byte{0x08, 0x08, 0x3a}, binary.AppendUvarint(nil, 1<<62)))
		}, "claims 4611686018427387904 bytes"},
		{"graph varint endless", func(dir string) {
			writeFile(t, filepath.Join(dir, "onnx/model.onnx"), graph([]byte{0x08}, bytes.Repeat([]byte{0xff}, 64)))
		}, "bad varint"},
		{"graph of only strings", func(dir string) {
			writeFile(t, filepath.Join(dir, "onnx/model.onnx"), bytes.Repeat([]byte{0x12, 0x00}, 1000))
		}, "no graph found"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := newTestStore(t)
			dir := writeONNXFolder(t, onnxFiles(t, kindClassify))
			tc.edit(dir)
			_, err := s.Import(context.Background(), dir, ImportOptions{Name: "evil/onnx"}, nil)
			if !errors.Is(err, ErrInvalidModel) || !strings.Contains(err.Error(), tc.reason) || len(err.Error()) > 1000 {
				t.Fatalf("import = %v; want a short ErrInvalidModel saying %q", err, tc.reason)
			}
			if files := contentFiles(t, s.Root()); len(files) != 0 {
				t.Errorf("store holds %v after a refused import", files)
			}
		})
	}
}

func sparse(t *testing.T, path string, size int64) {
	t.Helper()
	if err := os.Truncate(path, size); err != nil {
		t.Fatal(err)
	}
}

func FuzzCheckONNXFile(f *testing.F) {
	f.Add(fakeONNX(1, 100))
	f.Add([]byte{0x08, 0x08, 0x3a, 0xff, 0xff, 0xff, 0xff, 0x0f})
	f.Add([]byte("PK\x03\x04 zip"))
	f.Add(bytes.Repeat([]byte{0x12, 0x00}, 70))
	f.Fuzz(func(t *testing.T, b []byte) {
		err := checkONNXFile(bytes.NewReader(b), int64(len(b)), "m.onnx")
		if err != nil && !errors.Is(err, ErrInvalidModel) {
			t.Fatalf("error %v is not ErrInvalidModel", err)
		}
	})
}

func FuzzPlanONNX(f *testing.F) {
	f.Add([]byte(`{"architectures":["BertForSequenceClassification"],"id2label":{"0":"a","1":"b"},"max_position_embeddings":512}`), "")
	f.Add([]byte(`{"is_encoder_decoder":true,"model_type":"bart"}`), "summarize")
	f.Add([]byte(`{"id2label":{"x":"a"}}`), "classify")
	f.Add([]byte(`{"num_labels":1,"id2label":{"0":"LABEL_0"}}`), "rerank")
	f.Add([]byte(`[[[[`), "")
	paths := []string{"config.json", "tokenizer.json", "tokenizer_config.json", "onnx/model.onnx", "onnx/model_quantized.onnx",
		"onnx/encoder_model.onnx", "onnx/decoder_model_merged.onnx", "onnx/model.onnx_data"}
	f.Fuzz(func(t *testing.T, cfg []byte, task string) {
		plan, err := planONNX(paths, cfg, "", Task(task))
		if err != nil {
			if !errors.Is(err, ErrInvalidModel) {
				t.Fatalf("error %v is not ErrInvalidModel", err)
			}
			return
		}
		if len(plan.files) < 4 || len(plan.tasks) == 0 {
			t.Fatalf("plan %+v", plan)
		}
		if err := checkJSONFile(bytes.NewReader(cfg), int64(len(cfg)), onnxConfig); err != nil {
			t.Fatalf("planned from a config that is not JSON: %v", err)
		}
	})
}
