package models

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"sort"
	"testing"
	"time"

	"github.com/modeld/modeld/internal/ggufgen"
)

// testNow is the clock of test stores.
var testNow = time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC)

func newTestStore(t *testing.T) *Store {
	t.Helper()
	s, err := Open(t.TempDir(), Options{Now: func() time.Time { return testNow }, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// tinyGGUF returns the project's tiny test model (ggufgen, SPM vocabulary).
func tinyGGUF(t *testing.T) []byte {
	t.Helper()
	var buf bytes.Buffer
	if err := ggufgen.Write(&buf, ggufgen.Tiny(ggufgen.SPM)); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// fakeONNX returns bytes shaped like an ONNX ModelProto (ir_version,
// producer_name, a graph of n bytes); seed varies the content.
func fakeONNX(seed byte, n int) []byte {
	var b []byte
	b = append(b, 0x08, 0x08) // field 1 ir_version = 8
	name := []byte("modeld-test")
	b = append(b, 0x12, byte(len(name)))
	b = append(b, name...)
	b = append(b, 0x3a) // field 7 graph, length-delimited
	b = binary.AppendUvarint(b, uint64(n))
	for i := 0; i < n; i++ {
		b = append(b, byte(i*31)+seed)
	}
	return b
}

func sha256Hex(b []byte) string {
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}

func writeFile(t *testing.T, path string, data []byte) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, data, 0o644); err != nil {
		t.Fatal(err)
	}
}

func mustJSON(t *testing.T, v any) []byte {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// onnxKind names a test ONNX model shape.
type onnxKind string

const (
	kindEmbed     onnxKind = "embed"
	kindClassify  onnxKind = "classify"
	kindNLI       onnxKind = "nli"
	kindRerank    onnxKind = "rerank"
	kindSummarize onnxKind = "summarize"
)

// onnxFiles returns the files of a tiny HF-style ONNX folder of the given kind.
func onnxFiles(t *testing.T, kind onnxKind) map[string][]byte {
	t.Helper()
	cfg := map[string]any{"model_type": "bert", "max_position_embeddings": 512, "architectures": []string{"BertModel"}}
	files := map[string][]byte{
		"tokenizer.json":          []byte(`{"version":"1.0","model":{"type":"WordPiece","vocab":{"[UNK]":0}}}`),
		"tokenizer_config.json":   []byte(`{"model_max_length":512}`),
		"special_tokens_map.json": []byte(`{"unk_token":"[UNK]"}`),
		"README.md":               []byte("# test model\n"),
	}
	switch kind {
	case kindEmbed:
		files["onnx/model.onnx"] = fakeONNX(1, 3000)
		files["onnx/model_quantized.onnx"] = fakeONNX(2, 1000)
		files["1_Pooling/config.json"] = []byte(`{"pooling_mode_mean_tokens":true}`)
		files["modules.json"] = []byte(`[]`)
	case kindClassify:
		cfg["architectures"] = []string{"BertForSequenceClassification"}
		cfg["id2label"] = map[string]string{"0": "NEGATIVE", "1": "POSITIVE"}
		files["onnx/model.onnx"] = fakeONNX(3, 2000)
	case kindNLI:
		cfg["architectures"] = []string{"BertForSequenceClassification"}
		cfg["id2label"] = map[string]string{"0": "contradiction", "1": "neutral", "2": "entailment"}
		files["onnx/model.onnx"] = fakeONNX(4, 2000)
	case kindRerank:
		cfg["architectures"] = []string{"BertForSequenceClassification"}
		cfg["id2label"] = map[string]string{"0": "LABEL_0"}
		cfg["num_labels"] = 1
		files["onnx/model.onnx"] = fakeONNX(5, 2000)
	case kindSummarize:
		cfg["architectures"] = []string{"BartForConditionalGeneration"}
		cfg["model_type"] = "bart"
		cfg["is_encoder_decoder"] = true
		files["onnx/encoder_model.onnx"] = fakeONNX(6, 2000)
		files["onnx/decoder_model_merged.onnx"] = fakeONNX(7, 2500)
		files["onnx/decoder_model_merged_quantized.onnx"] = fakeONNX(8, 900)
		files["onnx/encoder_model_quantized.onnx"] = fakeONNX(9, 800)
		files["generation_config.json"] = []byte(`{"max_length":64}`)
	default:
		t.Fatalf("unknown kind %q", kind)
	}
	files["config.json"] = mustJSON(t, cfg)
	return files
}

// writeONNXFolder writes files under a new directory and returns it.
func writeONNXFolder(t *testing.T, files map[string][]byte) string {
	t.Helper()
	dir := t.TempDir()
	for p, b := range files {
		writeFile(t, filepath.Join(dir, filepath.FromSlash(p)), b)
	}
	return dir
}

// walkFiles returns every regular file under root with its size.
func walkFiles(t *testing.T, root string) map[string]int64 {
	t.Helper()
	out := map[string]int64{}
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.Type().IsRegular() {
			fi, err := d.Info()
			if err != nil {
				return err
			}
			rel, _ := filepath.Rel(root, p)
			out[filepath.ToSlash(rel)] = fi.Size()
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// contentFiles lists the files under root that are not lock files, sorted.
func contentFiles(t *testing.T, root string) []string {
	t.Helper()
	var out []string
	for p := range walkFiles(t, root) {
		if filepath.Ext(p) != ".lock" {
			out = append(out, p)
		}
	}
	sort.Strings(out)
	return out
}

func blobCount(t *testing.T, s *Store) int {
	t.Helper()
	entries, err := os.ReadDir(filepath.Join(s.Root(), dirBlobs))
	if err != nil {
		t.Fatal(err)
	}
	return len(entries)
}
