package models

import (
	"context"
	"errors"
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
	}{
		{dir: "vit-classify", tasks: []Task{TaskImageClassify}, labels: []string{"cat", "dog", "car", "tree"}},
		{dir: "vit-embed", tasks: []Task{TaskImageEmbed}},
		{dir: "vit-classify", opts: ImportOptions{Task: TaskImageEmbed}, tasks: []Task{TaskImageEmbed}, labels: []string{"cat", "dog", "car", "tree"}},
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
			if want := []string{"config.json", "preprocessor_config.json", "onnx/model.onnx"}; !reflect.DeepEqual(got, want) {
				t.Errorf("files %v, want %v", got, want)
			}
			if !reflect.DeepEqual(m.ONNX.Labels, tc.labels) {
				t.Errorf("labels %v, want %v", m.ONNX.Labels, tc.labels)
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
