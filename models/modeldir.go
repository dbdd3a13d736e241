package models

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"strings"
)

// dirLinks holds the per-model directories of symlinks made by ModelDir.
const dirLinks = "links"

// ModelDir returns a directory that presents model m the way loaders expect a
// model folder: every file of m at its path, as a symlink to its blob. The
// chosen ONNX variant appears under the canonical names the pipelines open
// (onnx/model.onnx, onnx/encoder_model.onnx, onnx/decoder_model_merged.onnx or
// onnx/decoder_model.onnx, onnx/decoder_with_past_model.onnx); external data
// files keep their names, which the graphs refer to. The directory is made
// once per manifest content and removed by Remove and Prune when no manifest
// matches it any more. Links take no space in DiskUsage.
func (s *Store) ModelDir(m *Manifest) (string, error) {
	names, err := linkNames(m)
	if err != nil {
		return "", err
	}
	dir := filepath.Join(s.root, dirLinks, linkKey(m))
	if fi, err := os.Stat(dir); err == nil && fi.IsDir() {
		return dir, nil
	}
	if err := os.MkdirAll(filepath.Join(s.root, dirLinks), 0o755); err != nil {
		return "", fmt.Errorf("model dir of %s: %w", m.ID, err)
	}
	tmp, err := os.MkdirTemp(filepath.Join(s.root, dirLinks), tmpPrefix)
	if err != nil {
		return "", fmt.Errorf("model dir of %s: %w", m.ID, err)
	}
	for _, f := range m.Files {
		blob, err := s.BlobPath(f.Digest)
		if err != nil {
			_ = os.RemoveAll(tmp)
			return "", err
		}
		link := filepath.Join(tmp, filepath.FromSlash(names[f.Path]))
		if err := os.MkdirAll(filepath.Dir(link), 0o755); err != nil {
			_ = os.RemoveAll(tmp)
			return "", fmt.Errorf("model dir of %s: %w", m.ID, err)
		}
		if err := os.Symlink(blob, link); err != nil {
			_ = os.RemoveAll(tmp)
			return "", fmt.Errorf("model dir of %s: %w", m.ID, err)
		}
	}
	if err := os.Rename(tmp, dir); err != nil {
		_ = os.RemoveAll(tmp)
		if fi, serr := os.Stat(dir); serr == nil && fi.IsDir() {
			return dir, nil // made meanwhile by another caller
		}
		return "", fmt.Errorf("model dir of %s: %w", m.ID, err)
	}
	return dir, nil
}

// linkNames maps each file of m to its name in the model directory.
func linkNames(m *Manifest) (map[string]string, error) {
	names := make(map[string]string, len(m.Files))
	for _, f := range m.Files {
		names[f.Path] = f.Path
	}
	if o := m.ONNX; o != nil {
		canon := map[string]string{o.Model: "model", o.Encoder: "encoder_model", o.DecoderPast: "decoder_with_past_model"}
		if o.Decoder != "" {
			canon[o.Decoder] = strings.TrimSuffix(path.Base(o.Decoder), variantSuffix(o.Variant)+".onnx")
		}
		for file, base := range canon {
			if file != "" {
				if _, ok := names[file]; ok {
					names[file] = onnxDir + base + ".onnx"
				}
			}
		}
	}
	seen := make(map[string]string, len(names))
	for file, name := range names {
		if other, dup := seen[name]; dup {
			return nil, fmt.Errorf("model dir of %s: %s and %s would both be %s", m.ID, other, file, name)
		}
		seen[name] = file
	}
	return names, nil
}

// linkKey names the model directory of a manifest's content.
func linkKey(m *Manifest) string {
	h := sha256.New()
	fmt.Fprintf(h, "%s\n", m.ID)
	if m.ONNX != nil {
		fmt.Fprintf(h, "%s %s %s %s\n", m.ONNX.Model, m.ONNX.Encoder, m.ONNX.Decoder, m.ONNX.DecoderPast)
	}
	for _, f := range m.Files {
		fmt.Fprintf(h, "%s %s\n", f.Path, f.Digest)
	}
	return hex.EncodeToString(h.Sum(nil))[:32]
}

// pruneLinks removes model directories no manifest in ms matches, and
// leftovers of interrupted ModelDir calls. It returns what it could not remove.
func (s *Store) pruneLinks(ms []*Manifest) error {
	keep := make(map[string]bool, len(ms))
	for _, m := range ms {
		keep[linkKey(m)] = true
	}
	entries, err := os.ReadDir(filepath.Join(s.root, dirLinks))
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	var errs []error
	for _, e := range entries {
		if !keep[e.Name()] {
			if err := os.RemoveAll(filepath.Join(s.root, dirLinks, e.Name())); err != nil {
				errs = append(errs, err)
			}
		}
	}
	return errors.Join(errs...)
}
