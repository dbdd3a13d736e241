// Package storetest holds the fixtures the tests of models and models/hub
// share: tiny GGUF and ONNX model files, and helpers that write and list
// files. It knows nothing of the store's internals (it does not import
// models), so both packages' tests can use it.
package storetest

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"testing"
	"time"

	"github.com/modeld/modeld/internal/ggufgen"
)

// Now is the clock of test stores.
var Now = time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC)

// TinyGGUF returns the project's tiny test model (ggufgen, SPM vocabulary).
func TinyGGUF(t testing.TB) []byte {
	t.Helper()
	var buf bytes.Buffer
	if err := ggufgen.Write(&buf, ggufgen.Tiny(ggufgen.SPM)); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// GGUFSeed returns the tiny test model with weights from seed: files with
// different content for each seed.
func GGUFSeed(t testing.TB, seed uint64) []byte {
	t.Helper()
	o := ggufgen.Tiny(ggufgen.SPM)
	o.Seed = seed
	var buf bytes.Buffer
	if err := ggufgen.Write(&buf, o); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// FakeONNX returns bytes shaped like an ONNX ModelProto (ir_version,
// producer_name, a graph of n bytes); seed varies the content.
func FakeONNX(seed byte, n int) []byte {
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

// SHA256Hex returns the sha256 of b in hex.
func SHA256Hex(b []byte) string {
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}

// WriteFile writes data at path, creating its directories.
func WriteFile(t testing.TB, path string, data []byte) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, data, 0o644); err != nil {
		t.Fatal(err)
	}
}

// WriteTemp writes data as name in a new directory and returns its path.
func WriteTemp(t testing.TB, name string, data []byte) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), name)
	WriteFile(t, p, data)
	return p
}

// MustJSON encodes v.
func MustJSON(t testing.TB, v any) []byte {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// ONNXKind names a test ONNX model shape.
type ONNXKind string

// The test ONNX model shapes.
const (
	KindEmbed     ONNXKind = "embed"
	KindClassify  ONNXKind = "classify"
	KindNLI       ONNXKind = "nli"
	KindRerank    ONNXKind = "rerank"
	KindSummarize ONNXKind = "summarize"
)

// ONNXFiles returns the files of a tiny HF-style ONNX folder of the given kind.
func ONNXFiles(t testing.TB, kind ONNXKind) map[string][]byte {
	t.Helper()
	cfg := map[string]any{"model_type": "bert", "max_position_embeddings": 512, "architectures": []string{"BertModel"}}
	files := map[string][]byte{
		"tokenizer.json":          []byte(`{"version":"1.0","model":{"type":"WordPiece","vocab":{"[UNK]":0}}}`),
		"tokenizer_config.json":   []byte(`{"model_max_length":512}`),
		"special_tokens_map.json": []byte(`{"unk_token":"[UNK]"}`),
		"README.md":               []byte("# test model\n"),
	}
	switch kind {
	case KindEmbed:
		files["onnx/model.onnx"] = FakeONNX(1, 3000)
		files["onnx/model_quantized.onnx"] = FakeONNX(2, 1000)
		files["1_Pooling/config.json"] = []byte(`{"pooling_mode_mean_tokens":true}`)
		files["modules.json"] = []byte(`[]`)
	case KindClassify:
		cfg["architectures"] = []string{"BertForSequenceClassification"}
		cfg["id2label"] = map[string]string{"0": "NEGATIVE", "1": "POSITIVE"}
		files["onnx/model.onnx"] = FakeONNX(3, 2000)
	case KindNLI:
		cfg["architectures"] = []string{"BertForSequenceClassification"}
		cfg["id2label"] = map[string]string{"0": "contradiction", "1": "neutral", "2": "entailment"}
		files["onnx/model.onnx"] = FakeONNX(4, 2000)
	case KindRerank:
		cfg["architectures"] = []string{"BertForSequenceClassification"}
		cfg["id2label"] = map[string]string{"0": "LABEL_0"}
		cfg["num_labels"] = 1
		files["onnx/model.onnx"] = FakeONNX(5, 2000)
	case KindSummarize:
		cfg["architectures"] = []string{"BartForConditionalGeneration"}
		cfg["model_type"] = "bart"
		cfg["is_encoder_decoder"] = true
		files["onnx/encoder_model.onnx"] = FakeONNX(6, 2000)
		files["onnx/decoder_model_merged.onnx"] = FakeONNX(7, 2500)
		files["onnx/decoder_model_merged_quantized.onnx"] = FakeONNX(8, 900)
		files["onnx/encoder_model_quantized.onnx"] = FakeONNX(9, 800)
		files["generation_config.json"] = []byte(`{"max_length":64}`)
	default:
		t.Fatalf("unknown kind %q", kind)
	}
	files["config.json"] = MustJSON(t, cfg)
	return files
}

// WalkFiles returns every regular file under root with its size.
func WalkFiles(t testing.TB, root string) map[string]int64 {
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

// ContentFiles lists the files under root that are not lock files, sorted.
func ContentFiles(t testing.TB, root string) []string {
	t.Helper()
	var out []string
	for p := range WalkFiles(t, root) {
		if filepath.Ext(p) != ".lock" {
			out = append(out, p)
		}
	}
	sort.Strings(out)
	return out
}

// StoreFiles lists every file of the store rooted at root but its two
// store-wide lock files, with its size, sorted.
func StoreFiles(t testing.TB, root string) []string {
	t.Helper()
	var out []string
	for p, n := range WalkFiles(t, root) {
		if p != "store.lock" && p != "active.lock" {
			out = append(out, fmt.Sprintf("%s %d", p, n))
		}
	}
	sort.Strings(out)
	return out
}

// FlipByte flips one bit of the byte at offset at of a blob, which stays
// read-only with its modification time: a change only hashing can find.
func FlipByte(t testing.TB, path string, at int64) {
	t.Helper()
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(path, 0o644); err != nil {
		t.Fatal(err)
	}
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	b := make([]byte, 1)
	if _, err := f.ReadAt(b, at); err != nil {
		t.Fatal(err)
	}
	b[0] ^= 0x01
	if _, err := f.WriteAt(b, at); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(path, 0o444); err != nil {
		t.Fatal(err)
	}
	if err := os.Chtimes(path, fi.ModTime(), fi.ModTime()); err != nil {
		t.Fatal(err)
	}
}
