package models

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"testing"
)

func TestImportGGUF(t *testing.T) {
	s := newTestStore(t)
	data := tinyGGUF(t)
	src := filepath.Join(t.TempDir(), "tiny-F32.gguf")
	writeFile(t, src, data)
	var events []Progress
	m, err := s.Import(context.Background(), src, ImportOptions{Name: "test/tiny"}, func(p Progress) { events = append(events, p) })
	if err != nil {
		t.Fatal(err)
	}
	if m.ID != "test/tiny" || m.Format != FormatGGUF || !reflect.DeepEqual(m.Tasks, []Task{TaskChat}) {
		t.Errorf("manifest = %+v", m)
	}
	if len(m.Files) != 1 || m.Files[0].Path != "tiny-F32.gguf" || m.Files[0].Digest != "sha256:"+sha256Hex(data) || m.Files[0].Size != int64(len(data)) {
		t.Errorf("files = %+v", m.Files)
	}
	g := m.GGUF
	if g == nil || g.Architecture != "llama" || g.ContextLength != 2048 || !g.ChatTemplate || g.FileType != "F32" ||
		g.Parameters == 0 || g.EmbeddingLength != 64 || g.BlockCount != 2 || g.Tokenizer != "llama" || g.File != "tiny-F32.gguf" {
		t.Errorf("gguf info = %+v", g)
	}
	if m.Source.Kind != SourceImport || m.Source.Path != src || !m.Created.Equal(testNow) {
		t.Errorf("source/created = %+v %v", m.Source, m.Created)
	}
	if len(events) == 0 || events[len(events)-1].Status != StatusSuccess {
		t.Errorf("last progress event = %+v, want success", events)
	}
	blob, err := s.FilePath(m, "tiny-F32.gguf")
	if err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile(blob)
	if err != nil || sha256Hex(got) != sha256Hex(data) {
		t.Fatalf("blob content differs (%v)", err)
	}
	back, err := s.Get("test/tiny:latest")
	if err != nil || !reflect.DeepEqual(back, m) {
		t.Errorf("Get = %+v, %v; want %+v", back, err, m)
	}
	// Importing again without Replace is refused; with Replace it works and
	// reuses the blob.
	if _, err := s.Import(context.Background(), src, ImportOptions{Name: "test/tiny"}, nil); !errors.Is(err, ErrExists) {
		t.Errorf("second import = %v, want ErrExists", err)
	}
	if _, err := s.Import(context.Background(), src, ImportOptions{Name: "test/tiny", Replace: true}, nil); err != nil {
		t.Errorf("replace: %v", err)
	}
	if n := blobCount(t, s); n != 1 {
		t.Errorf("%d blobs, want 1", n)
	}
	if _, err := s.Import(context.Background(), src, ImportOptions{Name: "test/x", Task: TaskEmbed}, nil); !errors.Is(err, ErrInvalidModel) {
		t.Errorf("--task embed on a GGUF = %v, want ErrInvalidModel", err)
	}
}

// A truncated or garbage GGUF is refused with the reason, and nothing is added.
func TestImportGGUFRefusesTruncatedAndGarbage(t *testing.T) {
	data := tinyGGUF(t)
	cases := map[string][]byte{
		"empty":       {},
		"garbage":     []byte(strings.Repeat("not a gguf file at all ", 100)),
		"ggml":        append([]byte("lmgg"), data[4:]...),
		"version 9":   append(append([]byte("GGUF"), 9, 0, 0, 0), data[8:]...),
		"huge counts": append(append([]byte("GGUF"), 3, 0, 0, 0, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x7f), data[16:]...),
	}
	for _, cut := range []int{3, 10, 23, 100, 1000, 5000, len(data) / 2, len(data) - 1} {
		cases["truncated at "+strconv.Itoa(cut)] = data[:cut]
	}
	for name, b := range cases {
		t.Run(name, func(t *testing.T) {
			s := newTestStore(t)
			src := filepath.Join(t.TempDir(), "broken.gguf")
			writeFile(t, src, b)
			_, err := s.Import(context.Background(), src, ImportOptions{Name: "broken"}, nil)
			if !errors.Is(err, ErrInvalidModel) {
				t.Fatalf("import = %v, want ErrInvalidModel", err)
			}
			if !strings.Contains(err.Error(), "broken.gguf") {
				t.Errorf("error %q does not name the file", err)
			}
			if files := contentFiles(t, s.Root()); len(files) != 0 {
				t.Errorf("store holds %v after a refused import", files)
			}
		})
	}
}

func TestImportONNXTasks(t *testing.T) {
	for _, tc := range []struct {
		kind    onnxKind
		opts    ImportOptions
		tasks   []Task
		files   []string
		labels  []string
		dtype   string
		encoder string
	}{
		{kind: kindEmbed, tasks: []Task{TaskEmbed}, dtype: "fp32",
			files: []string{"config.json", "tokenizer.json", "tokenizer_config.json", "onnx/model.onnx", "special_tokens_map.json", "modules.json", "1_Pooling/config.json"}},
		{kind: kindEmbed, opts: ImportOptions{Variant: "quantized"}, tasks: []Task{TaskEmbed}, dtype: "q8",
			files: []string{"config.json", "tokenizer.json", "tokenizer_config.json", "onnx/model_quantized.onnx", "special_tokens_map.json", "modules.json", "1_Pooling/config.json"}},
		{kind: kindClassify, tasks: []Task{TaskClassify}, labels: []string{"NEGATIVE", "POSITIVE"}, dtype: "fp32",
			files: []string{"config.json", "tokenizer.json", "tokenizer_config.json", "onnx/model.onnx", "special_tokens_map.json"}},
		{kind: kindNLI, tasks: []Task{TaskClassify, TaskZeroShot}, labels: []string{"contradiction", "neutral", "entailment"}, dtype: "fp32"},
		{kind: kindRerank, tasks: []Task{TaskRerank}, labels: []string{"LABEL_0"}, dtype: "fp32"},
		{kind: kindClassify, opts: ImportOptions{Task: TaskEmbed}, tasks: []Task{TaskEmbed}, labels: []string{"NEGATIVE", "POSITIVE"}, dtype: "fp32"},
		{kind: kindSummarize, tasks: []Task{TaskSummarize}, dtype: "fp32", encoder: "onnx/encoder_model.onnx",
			files: []string{"config.json", "tokenizer.json", "tokenizer_config.json", "onnx/encoder_model.onnx", "onnx/decoder_model_merged.onnx", "generation_config.json", "special_tokens_map.json"}},
		{kind: kindSummarize, opts: ImportOptions{Variant: "quantized"}, tasks: []Task{TaskSummarize}, dtype: "q8", encoder: "onnx/encoder_model_quantized.onnx"},
	} {
		name := string(tc.kind) + "/" + tc.opts.Variant + "/" + string(tc.opts.Task)
		t.Run(name, func(t *testing.T) {
			s := newTestStore(t)
			files := onnxFiles(t, tc.kind)
			dir := writeONNXFolder(t, files)
			tc.opts.Name = "test/" + string(tc.kind)
			m, err := s.Import(context.Background(), dir, tc.opts, nil)
			if err != nil {
				t.Fatal(err)
			}
			if m.Format != FormatONNX || !reflect.DeepEqual(m.Tasks, tc.tasks) {
				t.Errorf("format %s tasks %v, want onnx %v", m.Format, m.Tasks, tc.tasks)
			}
			if tc.files != nil {
				var got []string
				for _, f := range m.Files {
					got = append(got, f.Path)
				}
				if !reflect.DeepEqual(got, tc.files) {
					t.Errorf("files %v, want %v", got, tc.files)
				}
			}
			for _, f := range m.Files {
				if f.Digest != "sha256:"+sha256Hex(files[f.Path]) || f.Size != int64(len(files[f.Path])) {
					t.Errorf("file %s: %s %d, want the source's hash and size", f.Path, f.Digest, f.Size)
				}
				if _, ok := m.File(f.Path); !ok {
					t.Errorf("File(%q) not found", f.Path)
				}
			}
			if !reflect.DeepEqual(m.ONNX.Labels, tc.labels) || m.ONNX.DType != tc.dtype || m.ONNX.Encoder != tc.encoder {
				t.Errorf("onnx info = %+v", m.ONNX)
			}
			if m.ContextLength() != 512 {
				t.Errorf("context length %d, want 512", m.ContextLength())
			}
		})
	}
}

func TestImportONNXRefusals(t *testing.T) {
	for _, tc := range []struct {
		name   string
		kind   onnxKind
		edit   func(files map[string][]byte)
		opts   ImportOptions
		reason string
	}{
		{name: "missing tokenizer", kind: kindEmbed, edit: func(f map[string][]byte) { delete(f, "tokenizer.json") }, reason: "missing tokenizer.json"},
		{name: "missing config and tokenizer config", kind: kindEmbed, edit: func(f map[string][]byte) {
			delete(f, "config.json")
			delete(f, "tokenizer_config.json")
		}, reason: "missing tokenizer_config.json"},
		{name: "no model", kind: kindClassify, edit: func(f map[string][]byte) { delete(f, "onnx/model.onnx") }, reason: "no onnx/model*.onnx"},
		{name: "empty model", kind: kindClassify, edit: func(f map[string][]byte) { f["onnx/model.onnx"] = nil }, reason: "empty"},
		{name: "garbage model", kind: kindClassify, edit: func(f map[string][]byte) { f["onnx/model.onnx"] = []byte("PK\x03\x04 this is a zip") }, reason: "unexpected protobuf field"},
		{name: "truncated model", kind: kindClassify, edit: func(f map[string][]byte) { f["onnx/model.onnx"] = f["onnx/model.onnx"][:500] }, reason: "truncated"},
		{name: "bad config json", kind: kindClassify, edit: func(f map[string][]byte) { f["config.json"] = []byte("{") }, reason: "config.json is not valid JSON"},
		{name: "bad tokenizer json", kind: kindClassify, edit: func(f map[string][]byte) { f["tokenizer.json"] = []byte("[1,") }, reason: "tokenizer.json is not valid JSON"},
		{name: "unknown variant", kind: kindEmbed, opts: ImportOptions{Variant: "fp16"}, reason: `variant "fp16" not found`},
		{name: "several variants, no fp32", kind: kindEmbed, edit: func(f map[string][]byte) {
			f["onnx/model_fp16.onnx"] = f["onnx/model.onnx"]
			delete(f, "onnx/model.onnx")
		}, reason: "choose one with --variant"},
		{name: "summarize on an encoder", kind: kindEmbed, opts: ImportOptions{Task: TaskSummarize}, reason: "needs onnx/encoder_model"},
		{name: "classify without labels", kind: kindEmbed, opts: ImportOptions{Task: TaskClassify}, reason: "needs id2label"},
		{name: "zero-shot without nli labels", kind: kindClassify, opts: ImportOptions{Task: TaskZeroShot}, reason: "entailment and contradiction"},
		{name: "chat on onnx", kind: kindEmbed, opts: ImportOptions{Task: TaskChat}, reason: "needs a gguf model"},
		{name: "unknown task", kind: kindEmbed, opts: ImportOptions{Task: "translate"}, reason: `unknown task "translate"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := newTestStore(t)
			files := onnxFiles(t, tc.kind)
			if tc.edit != nil {
				tc.edit(files)
			}
			tc.opts.Name = "test/refused"
			_, err := s.Import(context.Background(), writeONNXFolder(t, files), tc.opts, nil)
			if !errors.Is(err, ErrInvalidModel) || !strings.Contains(err.Error(), tc.reason) {
				t.Fatalf("import = %v; want ErrInvalidModel saying %q", err, tc.reason)
			}
			if files := contentFiles(t, s.Root()); len(files) != 0 {
				t.Errorf("store holds %v after a refused import", files)
			}
		})
	}
}

func TestImportRefusesBadInput(t *testing.T) {
	s := newTestStore(t)
	txt := filepath.Join(t.TempDir(), "model.bin")
	writeFile(t, txt, []byte("x"))
	if _, err := s.Import(context.Background(), txt, ImportOptions{Name: "x"}, nil); !errors.Is(err, ErrInvalidModel) {
		t.Errorf("import of a .bin = %v, want ErrInvalidModel", err)
	}
	if _, err := s.Import(context.Background(), txt, ImportOptions{Name: "../x"}, nil); !errors.Is(err, ErrInvalidID) {
		t.Errorf("import with a hostile id = %v, want ErrInvalidID", err)
	}
	if _, err := s.Import(context.Background(), filepath.Join(t.TempDir(), "nope.gguf"), ImportOptions{Name: "x"}, nil); err == nil {
		t.Error("import of a missing file succeeded")
	}
	split := filepath.Join(t.TempDir(), "big-00001-of-00002.gguf")
	writeFile(t, split, tinyGGUF(t))
	if _, err := s.Import(context.Background(), split, ImportOptions{Name: "x"}, nil); !errors.Is(err, ErrInvalidModel) || !strings.Contains(err.Error(), "split") {
		t.Errorf("import of a split part = %v, want a split-GGUF refusal", err)
	}
}
