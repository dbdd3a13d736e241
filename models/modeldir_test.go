package models

import (
	"context"
	"os"
	"path/filepath"
	"testing"
)

func TestModelDirPresentsTheChosenVariant(t *testing.T) {
	s := newTestStore(t)
	emb := onnxFiles(t, kindEmbed)
	m, err := s.Import(context.Background(), writeONNXFolder(t, emb), ImportOptions{Name: "test/emb", Variant: "quantized"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	sum := onnxFiles(t, kindSummarize)
	ms, err := s.Import(context.Background(), writeONNXFolder(t, sum), ImportOptions{Name: "test/sum", Variant: "quantized"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		m    *Manifest
		want map[string][]byte
	}{
		{m, map[string][]byte{
			"onnx/model.onnx": emb["onnx/model_quantized.onnx"], "config.json": emb["config.json"],
			"tokenizer.json": emb["tokenizer.json"], "1_Pooling/config.json": emb["1_Pooling/config.json"],
		}},
		{ms, map[string][]byte{
			"onnx/encoder_model.onnx":        sum["onnx/encoder_model_quantized.onnx"],
			"onnx/decoder_model_merged.onnx": sum["onnx/decoder_model_merged_quantized.onnx"],
			"generation_config.json":         sum["generation_config.json"],
		}},
	} {
		dir, err := s.ModelDir(tc.m)
		if err != nil {
			t.Fatal(err)
		}
		again, err := s.ModelDir(tc.m)
		if err != nil || again != dir {
			t.Errorf("second ModelDir = %q, %v; want %q", again, err, dir)
		}
		for p, want := range tc.want {
			got, err := os.ReadFile(filepath.Join(dir, filepath.FromSlash(p)))
			if err != nil || string(got) != string(want) {
				t.Errorf("%s/%s: %v (content differs: %v)", tc.m.ID, p, err, string(got) != string(want))
			}
		}
		if _, err := os.Lstat(filepath.Join(dir, "onnx", "model_quantized.onnx")); !os.IsNotExist(err) {
			t.Errorf("%s: the variant's own name is also present (%v): a folder size would count it twice", tc.m.ID, err)
		}
	}
	// Links take no space in du, whose total still matches the disk.
	u, err := s.DiskUsage()
	if err != nil {
		t.Fatal(err)
	}
	var onDisk int64
	for _, n := range walkFiles(t, s.Root()) {
		onDisk += n
	}
	if u.Total != onDisk || Sum(u.Other) != 0 {
		t.Errorf("du total %d, on disk %d, other %v", u.Total, onDisk, u.Other)
	}
	dir, _ := s.ModelDir(m)
	if _, err := s.Remove(context.Background(), "test/emb"); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Errorf("model dir kept after rm: %v", err)
	}
	// A stale directory (its manifest replaced) goes with prune.
	sdir, _ := s.ModelDir(ms)
	if _, err := s.Import(context.Background(), writeONNXFolder(t, sum), ImportOptions{Name: "test/sum", Replace: true}, nil); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Prune(context.Background()); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(sdir); !os.IsNotExist(err) {
		t.Errorf("stale model dir kept after prune: %v", err)
	}
}
