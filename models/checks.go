package models

import (
	"fmt"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"
)

// The model-file checks a writer outside this package (package hub) runs on
// what it fetched before the store accepts it, the same ones import runs.

// ReadGGUF checks the GGUF file at filePath (name: its path inside the
// model) and returns what the manifest records of it; ErrInvalidModel says
// what is wrong.
func ReadGGUF(filePath, name string) (*GGUFInfo, error) { return readGGUF(filePath, name) }

// PickGGUF chooses the GGUF file of quantization tag among paths; tag ""
// takes the first of DefaultQuantOrder present.
func PickGGUF(paths []string, tag string) (string, error) { return pickGGUF(paths, tag) }

// IsQuantTag reports whether tag names a GGUF quantization (Q4_K_M, F16...).
func IsQuantTag(tag string) bool { return quantPattern.MatchString(tag) }

// GGUFTasks returns the tasks of a GGUF model: chat, or the override when
// it is not "" and a GGUF model can serve it.
func GGUFTasks(override Task) ([]Task, error) {
	if override == "" {
		return []Task{TaskChat}, nil
	}
	return overrideTasks(override, FormatGGUF, nil, false)
}

// ONNXPlan is what an ONNX folder or repository contributes to a manifest.
type ONNXPlan struct{ p *onnxPlan }

// Files returns the paths inside the model to fetch, required first.
func (p ONNXPlan) Files() []string { return p.p.files }

// Tasks returns the tasks to record.
func (p ONNXPlan) Tasks() []Task { return p.p.tasks }

// Info returns the ONNX details to record.
func (p ONNXPlan) Info() ONNXInfo { return p.p.info }

// PlanONNX decides which files of an ONNX listing (paths, '/'-separated)
// make the model, from its config.json (nil when absent), the variant
// ("" = onnx/model.onnx or the only one present) and the task ("" infers).
func PlanONNX(paths []string, configJSON []byte, variant string, task Task) (ONNXPlan, error) {
	p, err := planONNX(paths, configJSON, variant, task)
	return ONNXPlan{p}, err
}

// ValidateONNXFiles checks the fetched files of plan, opened by open: the
// JSON files parse and every graph is shaped like an ONNX model.
func ValidateONNXFiles(plan ONNXPlan, open func(path string) (*os.File, error)) error {
	return validateONNXFiles(plan.p, open)
}

// ReadProjector reads the header of a multimodal projector GGUF (an
// mmproj file) stored at path under name, refusing a file that is not one.
func ReadProjector(path, name, model string) (*GGUFInfo, error) {
	if !strings.EqualFold(filepath.Ext(name), ".gguf") || name == model {
		return nil, fmt.Errorf("%w: the projector %s is not a .gguf file beside the model", ErrInvalidModel, name)
	}
	info, err := readGGUF(path, name)
	if err != nil {
		return nil, err
	}
	if info.Architecture != projectorArch {
		return nil, fmt.Errorf("%w: %s is not a multimodal projector (its general.architecture is %q, a projector's is %q)", ErrInvalidModel, name, info.Architecture, projectorArch)
	}
	return info, nil
}

// PickProjector is the multimodal projector of a repository's listing: a
// GGUF whose name starts with mmproj, preferring F16 (the precision
// projectors are usually published in), else the first by name; "" when
// there is none.
func PickProjector(paths []string) string {
	var found []string
	for _, p := range paths {
		base := strings.ToLower(path.Base(p))
		if strings.HasPrefix(base, "mmproj") && strings.HasSuffix(base, ".gguf") {
			found = append(found, p)
		}
	}
	slices.Sort(found)
	for _, p := range found {
		if strings.Contains(strings.ToLower(p), "f16") {
			return p
		}
	}
	if len(found) > 0 {
		return found[0]
	}
	return ""
}
