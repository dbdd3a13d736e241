package models

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

// TestImportImageModels: an ONNX image model folder (config.json,
// preprocessor_config.json, onnx/model.onnx, no tokenizer) imports with its
// task inferred from the architecture, and its files kept.
func TestImportImageModels(t *testing.T) {
	for _, tc := range []struct {
		dir    string
		opts   ImportOptions
		tasks  []Task
		labels []string
		model  string // the graph kept (default onnx/model.onnx)
	}{
		{dir: "vit-classify", tasks: []Task{TaskImageClassify}, labels: []string{"cat", "dog", "car", "tree"}},
		{dir: "vit-embed", tasks: []Task{TaskImageEmbed}},
		{dir: "vit-classify", opts: ImportOptions{Task: TaskImageEmbed}, tasks: []Task{TaskImageEmbed}, labels: []string{"cat", "dog", "car", "tree"}},
		{dir: "clip-vision", tasks: []Task{TaskImageEmbed}, model: "onnx/vision_model.onnx"},
	} {
		t.Run(tc.dir+"/"+string(tc.opts.Task), func(t *testing.T) {
			s := newTestStore(t)
			tc.opts.Name = "test/" + tc.dir
			m, err := s.Import(context.Background(), filepath.Join("..", "testdata", "onnx", tc.dir), tc.opts, nil)
			if err != nil {
				t.Fatal(err)
			}
			if m.Format != FormatONNX || !reflect.DeepEqual(m.Tasks, tc.tasks) {
				t.Errorf("format %s tasks %v, want onnx %v", m.Format, m.Tasks, tc.tasks)
			}
			var got []string
			for _, f := range m.Files {
				got = append(got, f.Path)
			}
			if tc.model == "" {
				tc.model = "onnx/model.onnx"
			}
			if want := []string{"config.json", "preprocessor_config.json", tc.model}; !reflect.DeepEqual(got, want) || m.ONNX.Model != tc.model {
				t.Errorf("files %v, want %v", got, want)
			}
			if !reflect.DeepEqual(m.ONNX.Labels, tc.labels) {
				t.Errorf("labels %v, want %v", m.ONNX.Labels, tc.labels)
			}
			// The model dir the pipelines load has the graph at onnx/model.onnx.
			dir, err := s.ModelDir(m)
			if err != nil {
				t.Fatal(err)
			}
			for _, f := range []string{"config.json", "preprocessor_config.json", "onnx/model.onnx"} {
				if _, err := os.Stat(filepath.Join(dir, f)); err != nil {
					t.Errorf("model dir: %v", err)
				}
			}
		})
	}
	// A text task on an image model, an image task on a text model, and an
	// image classifier without labels are refused.
	s := newTestStore(t)
	for _, c := range []struct {
		dir  string
		task Task
		want string
	}{
		{"vit-embed", TaskEmbed, "needs a text model"},
		{"vit-embed", TaskImageClassify, "id2label"},
		{"classify", TaskImageClassify, "needs an image model"},
	} {
		_, err := s.Import(context.Background(), filepath.Join("..", "testdata", "onnx", c.dir), ImportOptions{Name: "test/x", Task: c.task}, nil)
		if !errors.Is(err, ErrInvalidModel) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s as %s: %v, want %q", c.dir, c.task, err, c.want)
		}
	}
}
