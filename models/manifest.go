package models

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"
)

// ManifestVersion is the schema version written into every manifest. A
// manifest with a newer version is refused rather than half understood.
const ManifestVersion = 1

// Format is the file format of a model.
type Format string

// Formats a model can have.
const (
	FormatGGUF Format = "gguf" // served by llama.cpp
	FormatONNX Format = "onnx" // served by ONNX Runtime pipelines
)

// Manifest describes one model: its files, what it is and where it came from.
// It is stored as JSON under manifests/ and never modified in place.
type Manifest struct {
	SchemaVersion int       `json:"schema_version"`
	ID            string    `json:"id"`
	Format        Format    `json:"format"`
	Tasks         []Task    `json:"tasks"`
	Files         []File    `json:"files"`
	Source        Source    `json:"source"`
	Created       time.Time `json:"created"`
	Modified      time.Time `json:"modified"`
	GGUF          *GGUFInfo `json:"gguf,omitempty"`
	ONNX          *ONNXInfo `json:"onnx,omitempty"`
}

// File is one file of a model.
type File struct {
	Path   string `json:"path"`   // path inside the model, '/'-separated ("onnx/model.onnx")
	Digest string `json:"digest"` // "sha256:<64 hex>"
	Size   int64  `json:"size"`
	// GitOID is the git blob id of a hub file kept outside LFS (the hub
	// publishes no sha256 for those), so a later pull can find its blob.
	GitOID string `json:"git_oid,omitempty"`
}

// SourceKind says how a model came into the store.
type SourceKind string

// Source kinds.
const (
	SourceImport SourceKind = "import" // copied from a local path
	SourceHub    SourceKind = "hf"     // pulled from a Hugging Face hub
	SourceURL    SourceKind = "url"    // pulled from a plain URL
)

// Source records where a model came from.
type Source struct {
	Kind     SourceKind `json:"kind"`
	Ref      string     `json:"ref,omitempty"`      // what the user asked for ("hf:owner/repo:Q4_K_M")
	Path     string     `json:"path,omitempty"`     // import: absolute source path
	Endpoint string     `json:"endpoint,omitempty"` // hf: hub base URL
	Repo     string     `json:"repo,omitempty"`     // hf: "owner/repo"
	Revision string     `json:"revision,omitempty"` // hf: revision asked for ("main")
	Commit   string     `json:"commit,omitempty"`   // hf: commit the files came from
	URL      string     `json:"url,omitempty"`      // url: the URL
	// Quantized is the quantization `modeld import --quantize` made of the
	// file at Path ("Q4_K_M"); "" when the file was stored as it was.
	Quantized string `json:"quantized,omitempty"`
}

// GGUFInfo is what the store read from a GGUF header.
type GGUFInfo struct {
	File            string `json:"file"` // path of the .gguf inside the model
	Name            string `json:"name,omitempty"`
	Architecture    string `json:"architecture"`
	Parameters      uint64 `json:"parameters"`
	ContextLength   uint64 `json:"context_length,omitempty"`
	EmbeddingLength uint64 `json:"embedding_length,omitempty"`
	BlockCount      uint64 `json:"block_count,omitempty"`
	FileType        string `json:"file_type,omitempty"` // quantization, e.g. "Q4_K_M", "F16"
	ChatTemplate    bool   `json:"chat_template"`
	Tokenizer       string `json:"tokenizer,omitempty"` // tokenizer.ggml.model
	// Projector is the path inside the model of its multimodal projector
	// (an mmproj .gguf), "" for a text-only model.
	Projector string `json:"projector,omitempty"`
}

// ONNXInfo is what the store read from an ONNX model folder.
type ONNXInfo struct {
	Architectures []string `json:"architectures,omitempty"` // config.json "architectures"
	ModelType     string   `json:"model_type,omitempty"`    // config.json "model_type"
	Labels        []string `json:"labels,omitempty"`        // id2label, in id order
	Variant       string   `json:"variant,omitempty"`       // "" (fp32 model.onnx), "quantized", "fp16", ...
	DType         string   `json:"dtype"`                   // "fp32", "q8", "fp16", ...
	MaxLength     int      `json:"max_length,omitempty"`    // max_position_embeddings, when given
	Model         string   `json:"model,omitempty"`         // encoder-only model file ("onnx/model.onnx")
	Encoder       string   `json:"encoder,omitempty"`       // summarize: encoder file
	Decoder       string   `json:"decoder,omitempty"`       // summarize: decoder file (merged when available)
	DecoderPast   string   `json:"decoder_with_past,omitempty"`
}

// Size is the sum of the model's file sizes (shared files counted in full).
func (m *Manifest) Size() int64 {
	var n int64
	for _, f := range m.Files {
		n += f.Size
	}
	return n
}

// File returns the model's file at path (a '/'-separated path inside the model).
func (m *Manifest) File(path string) (File, bool) {
	for _, f := range m.Files {
		if f.Path == path {
			return f, true
		}
	}
	return File{}, false
}

// HasTask reports whether the model serves t.
func (m *Manifest) HasTask(t Task) bool {
	for _, have := range m.Tasks {
		if have == t {
			return true
		}
	}
	return false
}

// Quantization returns the GGUF file type or the ONNX dtype, whichever applies.
func (m *Manifest) Quantization() string {
	switch {
	case m.GGUF != nil:
		return m.GGUF.FileType
	case m.ONNX != nil:
		return m.ONNX.DType
	}
	return ""
}

// ContextLength returns the model's context length when known, else 0.
func (m *Manifest) ContextLength() uint64 {
	switch {
	case m.GGUF != nil:
		return m.GGUF.ContextLength
	case m.ONNX != nil && m.ONNX.MaxLength > 0:
		return uint64(m.ONNX.MaxLength)
	}
	return 0
}

// validate checks a manifest read from disk or about to be written.
func (m *Manifest) validate() error {
	var errs []error
	if m.SchemaVersion < 1 || m.SchemaVersion > ManifestVersion {
		errs = append(errs, fmt.Errorf("schema version %d is not supported (this modeld reads up to %d)", m.SchemaVersion, ManifestVersion))
	}
	if _, err := ParseID(m.ID); err != nil {
		errs = append(errs, err)
	}
	switch m.Format {
	case FormatGGUF, FormatONNX:
	default:
		errs = append(errs, fmt.Errorf("unknown format %q", shownID(string(m.Format))))
	}
	if len(m.Tasks) == 0 {
		errs = append(errs, errors.New("no task"))
	}
	for _, t := range m.Tasks {
		if _, err := ParseTask(string(t)); err != nil {
			errs = append(errs, err)
		}
	}
	if len(m.Files) == 0 {
		errs = append(errs, errors.New("no files"))
	}
	seen := make(map[string]bool, len(m.Files))
	for _, f := range m.Files {
		if err := checkModelPath(f.Path); err != nil {
			errs = append(errs, err)
		}
		if seen[f.Path] {
			errs = append(errs, fmt.Errorf("file %q listed twice", shownID(f.Path)))
		}
		seen[f.Path] = true
		if _, err := parseDigest(f.Digest); err != nil {
			errs = append(errs, fmt.Errorf("file %q: %w", shownID(f.Path), err))
		}
		if f.Size < 0 {
			errs = append(errs, fmt.Errorf("file %q: negative size", shownID(f.Path)))
		}
	}
	if m.GGUF != nil && m.GGUF.Projector != "" && !seen[m.GGUF.Projector] {
		errs = append(errs, fmt.Errorf("projector %q is not one of the files", shownID(m.GGUF.Projector)))
	}
	if len(errs) > 5 { // a message, not a copy of the file
		errs = append(errs[:5], fmt.Errorf("and %d more problems", len(errs)-5))
	}
	return errors.Join(errs...)
}

// checkModelPath validates a path inside a model: relative, '/'-separated,
// no empty, "." or ".." elements, no backslashes or control characters.
func checkModelPath(p string) error {
	if p == "" || strings.HasPrefix(p, "/") || strings.ContainsAny(p, "\\\x00") {
		return fmt.Errorf("file path %q is not a relative '/'-separated path", shownID(p))
	}
	for _, el := range strings.Split(p, "/") {
		if el == "" || el == "." || el == ".." {
			return fmt.Errorf("file path %q has an empty, '.' or '..' element", shownID(p))
		}
	}
	for _, r := range p {
		if r < 0x20 || r == 0x7f {
			return fmt.Errorf("file path %q contains a control character", shownID(p))
		}
	}
	return nil
}

// maxManifestSize bounds a manifest file; a larger one is corrupt.
const maxManifestSize = 16 << 20

// errManifestTooNew: a manifest of a newer schema version than this modeld
// reads. It is not corrupt: Prune keeps it and the blobs it names.
var errManifestTooNew = errors.New("manifest written by a newer modeld")

// decodeManifest parses and validates manifest JSON. Errors wrap
// ErrCorruptManifest, or errManifestTooNew for a newer schema version.
func decodeManifest(data []byte) (*Manifest, error) {
	if len(data) > maxManifestSize {
		return nil, fmt.Errorf("%w: %d bytes, more than %d", ErrCorruptManifest, len(data), maxManifestSize)
	}
	var m Manifest
	if err := json.Unmarshal(data, &m); err != nil {
		return nil, fmt.Errorf("%w: not a valid manifest file: %w", ErrCorruptManifest, err)
	}
	if m.SchemaVersion > ManifestVersion {
		return nil, fmt.Errorf("manifest of %q: %w: schema version %d, this modeld reads up to %d",
			shortText(m.ID), errManifestTooNew, m.SchemaVersion, ManifestVersion)
	}
	if err := m.validate(); err != nil {
		return nil, fmt.Errorf("%w: manifest of %q: %w", ErrCorruptManifest, shortText(m.ID), err)
	}
	// Never show credentials a manifest written by an older modeld kept.
	if m.Source.Kind != SourceImport {
		m.Source.Ref = RedactURL(m.Source.Ref)
		m.Source.URL = RedactURL(m.Source.URL)
		m.Source.Endpoint = RedactURL(m.Source.Endpoint)
	}
	return &m, nil
}

// DefaultEndpoint is the Hugging Face hub that pulls use when their
// configuration names none (package hub; the daemon's default setting).
const DefaultEndpoint = "https://huggingface.co"

// shortText cuts s to 100 bytes for an error message.
func shortText(s string) string {
	if len(s) > 100 {
		return s[:100] + "…"
	}
	return s
}

// manifestDigests reads what it can of the digests a manifest names, even
// from one that does not decode as a whole (a newer schema, a damaged
// field); nil when nothing is readable (truncated JSON, garbage).
func manifestDigests(data []byte) []string {
	var partial struct {
		Files []struct {
			Digest string `json:"digest"`
		} `json:"files"`
	}
	if len(data) > maxManifestSize || json.Unmarshal(data, &partial) != nil {
		return nil
	}
	var out []string
	for _, f := range partial.Files {
		if h, err := parseDigest(f.Digest); err == nil {
			out = append(out, h)
		}
	}
	return out
}

// encodeManifest validates and serialises a manifest.
func encodeManifest(m *Manifest) ([]byte, error) {
	if err := m.validate(); err != nil {
		return nil, fmt.Errorf("manifest of %q: %w", m.ID, err)
	}
	data, err := json.MarshalIndent(m, "", "  ")
	if err != nil {
		return nil, fmt.Errorf("encode manifest: %w", err)
	}
	return append(data, '\n'), nil
}
