package models

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
)

// ImportOptions configures Import.
type ImportOptions struct {
	Name    string // model id to create (required)
	Task    Task   // "" infers the task from the files
	Variant string // ONNX: use onnx/model_<Variant>.onnx
	Replace bool   // replace a model with the same id instead of failing with ErrExists
	// Projector is a GGUF chat model's multimodal projector (an mmproj
	// .gguf, general.architecture "clip"), kept with the model.
	Projector string
	// Quantize, for a GGUF model, stores a copy quantized to this type
	// ("Q4_K_M") instead of the file itself, made by Quantizer.
	Quantize  string
	Quantizer Quantizer
}

// Import copies a local model into the store under opts.Name: a .gguf file
// (header and metadata must parse) or a Hugging Face-style ONNX folder
// (config.json, tokenizer.json, tokenizer_config.json, onnx/*.onnx, optional
// generation_config.json, special_tokens_map.json, modules.json,
// 1_Pooling/config.json). Files are hashed while copied. When validation
// fails, nothing is added and the error (ErrInvalidModel) says why.
func (s *Store) Import(ctx context.Context, src string, opts ImportOptions, progress ProgressFunc) (*Manifest, error) {
	id, err := ParseID(opts.Name)
	if err != nil {
		return nil, err
	}
	if opts.Task != "" {
		if _, err := ParseTask(string(opts.Task)); err != nil {
			return nil, err
		}
	}
	if !opts.Replace {
		if _, err := s.get(id); err == nil {
			return nil, fmt.Errorf("%w: %s (remove it first, or replace it)", ErrExists, id)
		}
	}
	abs, err := filepath.Abs(src)
	if err != nil {
		return nil, fmt.Errorf("import %s: %w", src, err)
	}
	fi, err := os.Stat(abs)
	if err != nil {
		return nil, fmt.Errorf("import %s: %w", src, err)
	}
	em := NewEmitter(0)
	defer em.Subscribe(progress)()
	end, err := s.beginActive(ctx)
	if err != nil {
		return nil, err
	}
	defer end()
	var pins pinSet // blobs stay pinned until the manifest names them
	defer pins.release()

	var m *Manifest
	switch {
	case fi.Mode().IsRegular() && strings.EqualFold(filepath.Ext(abs), ".gguf"):
		m, err = s.importGGUF(ctx, abs, opts, em, &pins)
	case opts.Quantize != "" && !(fi.Mode().IsRegular() && strings.EqualFold(filepath.Ext(abs), ".gguf")):
		err = fmt.Errorf("%w: --quantize applies to GGUF model files; %s is not one", ErrInvalidModel, src)
	case fi.IsDir():
		m, err = s.importONNX(ctx, abs, opts, em, &pins)
	default:
		err = fmt.Errorf("%w: %s is neither a .gguf file nor an ONNX model folder", ErrInvalidModel, src)
	}
	if err != nil {
		return nil, fmt.Errorf("import %s: %w", src, err)
	}
	now := s.now().UTC()
	m.SchemaVersion = ManifestVersion
	m.ID = id.String()
	m.Source = Source{Kind: SourceImport, Path: abs, Quantized: strings.ToUpper(opts.Quantize)}
	m.Created, m.Modified = now, now
	em.Emit(Progress{Status: StatusWriting})
	if err := s.commitManifest(m, opts.Replace); err != nil {
		return nil, fmt.Errorf("import %s: %w", src, err)
	}
	em.Emit(Progress{Status: StatusSuccess})
	return m, nil
}

func (s *Store) importGGUF(ctx context.Context, path string, opts ImportOptions, em *Emitter, pins *pinSet) (*Manifest, error) {
	if opts.Variant != "" {
		return nil, fmt.Errorf("%w: --variant applies to ONNX models, not GGUF", ErrInvalidModel)
	}
	if opts.Projector != "" && opts.Task != "" && opts.Task != TaskChat {
		return nil, fmt.Errorf("%w: --mmproj applies to chat models", ErrInvalidModel)
	}
	name := filepath.Base(path)
	info, err := readGGUF(path, name)
	if err != nil {
		return nil, err
	}
	tasks := []Task{TaskChat}
	if opts.Task != "" {
		if tasks, err = overrideTasks(opts.Task, FormatGGUF, nil, false); err != nil {
			return nil, err
		}
	}
	if info.Architecture == projectorArch {
		return nil, fmt.Errorf("%w: %s is a multimodal projector (mmproj), not a model: import its chat model with --mmproj %s", ErrInvalidModel, name, name)
	}
	var proj *GGUFInfo
	if opts.Projector != "" {
		if proj, err = readProjector(opts.Projector, name); err != nil {
			return nil, err
		}
		info.Projector = proj.File
	}
	var f File
	if opts.Quantize != "" {
		if err := quantizableInput(info); err != nil {
			return nil, err
		}
		f, info, err = s.quantizeIn(ctx, path, name, opts, em, pins)
		if proj != nil && info != nil {
			info.Projector = proj.File
		}
	} else {
		f, err = s.importFile(ctx, path, name, em, pins)
	}
	if err != nil {
		return nil, err
	}
	m := &Manifest{Format: FormatGGUF, Tasks: tasks, Files: []File{f}, GGUF: info}
	if proj != nil {
		pf, err := s.importFile(ctx, opts.Projector, proj.File, em, pins)
		if err != nil {
			return nil, err
		}
		m.Files = append(m.Files, pf)
	}
	return m, nil
}

// projectorArch is the general.architecture of llama.cpp's multimodal
// projector files.
const projectorArch = "clip"

// readProjector checks that path is a multimodal projector GGUF to keep
// beside the model file named model.
func readProjector(path, model string) (*GGUFInfo, error) {
	if !strings.EqualFold(filepath.Ext(path), ".gguf") {
		return nil, fmt.Errorf("%w: the projector %s is not a .gguf file", ErrInvalidModel, filepath.Base(path))
	}
	name := filepath.Base(path)
	if name == model {
		return nil, fmt.Errorf("%w: the projector and the model are both named %s", ErrInvalidModel, name)
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

func (s *Store) importONNX(ctx context.Context, dir string, opts ImportOptions, em *Emitter, pins *pinSet) (*Manifest, error) {
	if opts.Projector != "" {
		return nil, fmt.Errorf("%w: --mmproj applies to GGUF chat models, not ONNX", ErrInvalidModel)
	}
	// The folder's links are resolved and checked first (folder.go): only
	// the folder's own files are read.
	realDir, roots, err := folderRoots(dir)
	if err != nil {
		return nil, fmt.Errorf("read folder: %w", err)
	}
	var paths []string
	files := map[string]string{} // path in the model -> file read
	err = filepath.WalkDir(realDir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if p != realDir && hasDotPrefix(d.Name()) {
				return filepath.SkipDir // .git, .cache
			}
			return nil
		}
		rel, err := filepath.Rel(realDir, p)
		if err != nil {
			return err
		}
		rel = filepath.ToSlash(rel)
		real, ok, err := folderFile(p, rel, roots)
		if err != nil || !ok {
			return err
		}
		paths = append(paths, rel)
		files[rel] = real
		return nil
	})
	if errors.Is(err, ErrInvalidModel) {
		return nil, err
	}
	if err != nil {
		return nil, fmt.Errorf("read folder: %w", err)
	}
	dir = realDir
	cfg, err := readConfigJSON(filepath.Join(dir, onnxConfig))
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("read config.json: %w", err)
	}
	plan, err := planONNX(paths, cfg, opts.Variant, opts.Task)
	if err != nil {
		return nil, err
	}
	open := func(p string) (*os.File, error) { return openFolderFile(files[p], p) }
	if err := validateONNXFiles(plan, open); err != nil {
		return nil, err
	}
	m := &Manifest{Format: FormatONNX, Tasks: plan.tasks, ONNX: &plan.info}
	for _, p := range plan.files {
		in, err := open(p)
		if err != nil {
			return nil, err
		}
		f, err := s.copyIn(ctx, in, p, em, pins)
		if err != nil {
			return nil, err
		}
		m.Files = append(m.Files, f)
	}
	return m, nil
}

// validateONNXFiles checks the files of a plan: the JSON files parse and
// every graph passes checkONNXFile.
func validateONNXFiles(plan *onnxPlan, open func(path string) (*os.File, error)) error {
	var errs []error
	for _, p := range plan.files {
		isGraph := strings.HasSuffix(p, ".onnx")
		if !isGraph && !strings.HasSuffix(p, ".json") {
			continue
		}
		err := func() error {
			f, err := open(p)
			if err != nil {
				return err
			}
			defer f.Close() //nolint:errcheck // read-only
			fi, err := f.Stat()
			if err != nil {
				return err
			}
			if isGraph {
				return checkONNXFile(f, fi.Size(), p)
			}
			return checkJSONFile(f, fi.Size(), p)
		}()
		if err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// importFile copies src into a blob, hashing while copying, and returns the
// manifest entry. The blob is added to pins.
func (s *Store) importFile(ctx context.Context, src, name string, em *Emitter, pins *pinSet) (File, error) {
	in, err := os.Open(src)
	if err != nil {
		return File{}, fmt.Errorf("open %s: %w", name, err)
	}
	return s.copyIn(ctx, in, name, em, pins)
}

// copyIn copies the open file in into a blob like importFile, and closes it.
func (s *Store) copyIn(ctx context.Context, in *os.File, name string, em *Emitter, pins *pinSet) (File, error) {
	defer in.Close() //nolint:errcheck // read-only
	fi, err := in.Stat()
	if err != nil {
		return File{}, fmt.Errorf("stat %s: %w", name, err)
	}
	pname := "import-" + randomSuffix()
	unlock, err := s.lockPartial(ctx, pname, nil)
	if err != nil {
		return File{}, err
	}
	defer func() {
		unlock()
		s.removeLockFile(pname)
	}()
	ppath := s.partialPath(pname)
	out, err := os.OpenFile(ppath, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
	if err != nil {
		return File{}, fmt.Errorf("create partial: %w", err)
	}
	total := fi.Size()
	hw := newHashingWriter(out)
	em.Emit(Progress{Status: "importing " + name, File: name, Total: total})
	_, cerr := CopyContext(ctx, hw, in, func(n int64) {
		em.Emit(Progress{Status: "importing " + name, File: name, Total: total, Completed: n})
	})
	if err := errors.Join(cerr, out.Close()); err != nil {
		_ = os.Remove(ppath)
		return File{}, fmt.Errorf("copy %s: %w", name, err)
	}
	h := hw.sum()
	pins.add(s.pin(h))
	if err := s.commitBlob(ppath, h); err != nil {
		_ = os.Remove(ppath)
		return File{}, err
	}
	return File{Path: name, Digest: DigestPrefix + h, Size: hw.n}, nil
}
