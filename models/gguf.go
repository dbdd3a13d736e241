package models

import (
	"errors"
	"fmt"
	"path"
	"regexp"
	"slices"
	"strings"

	gguf "github.com/gpustack/gguf-parser-go"

	"github.com/modeld/modeld/internal/chattmpl"
	"github.com/modeld/modeld/internal/ggufscan"
	"github.com/modeld/modeld/internal/jinja"
)

// readGGUF parses the header and metadata of the GGUF file at filePath and
// returns what the manifest records. A truncated, corrupt or hostile file is
// an ErrInvalidModel saying what is wrong and at which byte. name is the
// file's path inside the model. Import and pull both come here.
func readGGUF(filePath, name string) (info *GGUFInfo, err error) {
	if gguf.CompleteShardGGUFFilename(filePath) != nil {
		return nil, fmt.Errorf("%w: %s is one part of a split GGUF; split models are not supported yet (merge them with llama-gguf-split --merge)", ErrInvalidModel, path.Base(name))
	}
	// The bounded scan first: the metadata parser below recurses into nested
	// arrays and allocates what counts declare, and a stack overflow or an
	// out-of-memory is fatal, not a panic.
	if _, err := ggufscan.ScanFile(filePath); err != nil {
		if errors.Is(err, ggufscan.ErrInvalid) {
			return nil, fmt.Errorf("%w: %s is not a valid GGUF file: %w", ErrInvalidModel, name, err)
		}
		return nil, fmt.Errorf("read %s: %w", name, err)
	}
	// The parser panics on some malformed values (a string key holding a
	// number); that is a corrupt file, not a crash.
	defer func() {
		if r := recover(); r != nil {
			info, err = nil, fmt.Errorf("%w: %s: malformed GGUF metadata: %v", ErrInvalidModel, name, r)
		}
	}()
	// Large arrays (the vocabulary) are skipped, not held: only their length
	// is recorded.
	gf, err := gguf.ParseGGUFFile(filePath, gguf.SkipLargeMetadata())
	if err != nil {
		return nil, fmt.Errorf("%w: %s is not a readable GGUF file (truncated or corrupt?): %w", ErrInvalidModel, name, err)
	}
	kv := gf.Header.MetadataKV
	str := func(key string) string {
		if v, ok := kv.Get(key); ok && v.ValueType == gguf.GGUFMetadataValueTypeString {
			return v.ValueString()
		}
		return ""
	}
	num := func(key string) uint64 {
		if v, ok := kv.Get(key); ok && v.ValueType.IsNumeric() {
			return gguf.ValueNumeric[uint64](v)
		}
		return 0
	}
	arch := str("general.architecture")
	if arch == "" {
		return nil, fmt.Errorf("%w: %s has no general.architecture", ErrInvalidModel, name)
	}
	md := gf.Metadata()
	info = &GGUFInfo{
		File:            name,
		Name:            str("general.name"),
		Architecture:    arch,
		Parameters:      uint64(gf.ModelParameters),
		ContextLength:   num(arch + ".context_length"),
		EmbeddingLength: num(arch + ".embedding_length"),
		BlockCount:      num(arch + ".block_count"),
		Tokenizer:       str("tokenizer.ggml.model"),
	}
	if md.FileTypeDescriptor != "" && md.FileTypeDescriptor != "Unknown" {
		info.FileType = md.FileTypeDescriptor
	}
	if _, ok := kv.Get("tokenizer.chat_template"); ok {
		info.ChatTemplate = true
		if err := chattmpl.Check(str("tokenizer.chat_template"), jinja.Budget{}); err != nil {
			return nil, fmt.Errorf("%w: %s: %w", ErrInvalidModel, name, err)
		}
	}
	return info, nil
}

// quantPattern matches a quantization token in a GGUF file name.
var quantPattern = regexp.MustCompile(`(?i)^(BF16|F16|F32|[KIT]?Q[0-9][A-Z0-9_]*|IQ[0-9][A-Z0-9_]*)$`)

// shardPattern matches the name of one part of a split GGUF.
var shardPattern = regexp.MustCompile(`-\d{5}-of-\d{5}\.gguf$`)

// quantOfFilename returns the quantization named in a GGUF file name
// ("Qwen2.5-0.5B-Instruct-Q4_K_M.gguf" -> "Q4_K_M"), upper-cased, or "".
func quantOfFilename(name string) string {
	base := strings.TrimSuffix(path.Base(name), path.Ext(name))
	fields := strings.FieldsFunc(base, func(r rune) bool { return r == '-' || r == '.' })
	for i := len(fields) - 1; i >= 0; i-- {
		if quantPattern.MatchString(fields[i]) {
			return strings.ToUpper(fields[i])
		}
	}
	return ""
}

// DefaultQuantOrder returns the order in which a GGUF pull without a tag
// picks a file from the repository: the first quantization present wins.
// When none of these is present and the repository has exactly one GGUF
// file, that file is used; otherwise the pull fails and lists what is there.
func DefaultQuantOrder() []string {
	return []string{"Q4_K_M", "Q4_K_S", "Q5_K_M", "Q4_0", "Q8_0", "Q6_K", "Q5_0", "F16", "BF16", "F32"}
}

// pickGGUF chooses the GGUF file of a repository listing for tag ("" means
// DefaultQuantOrder). Multimodal projectors (mmproj) and split files are not
// candidates.
func pickGGUF(paths []string, tag string) (string, error) {
	byQuant := make(map[string][]string)
	var all []string
	for _, p := range paths {
		lower := strings.ToLower(p)
		if !strings.HasSuffix(lower, ".gguf") || strings.Contains(lower, "mmproj") || shardPattern.MatchString(lower) {
			continue
		}
		all = append(all, p)
		q := quantOfFilename(p)
		byQuant[q] = append(byQuant[q], p)
	}
	if len(all) == 0 {
		return "", fmt.Errorf("%w: the repository has no single-file .gguf model", ErrRemoteNotFound)
	}
	choose := func(q string) (string, bool, error) {
		files := byQuant[q]
		switch len(files) {
		case 0:
			return "", false, nil
		case 1:
			return files[0], true, nil
		}
		return "", false, fmt.Errorf("%w: %d files have quantization %s: %s", ErrInvalidRef, len(files), q, strings.Join(files, ", "))
	}
	if tag != "" {
		p, ok, err := choose(strings.ToUpper(tag))
		if err != nil || ok {
			return p, err
		}
		return "", fmt.Errorf("%w: no %s file in the repository (available: %s)", ErrRemoteNotFound, strings.ToUpper(tag), availableQuants(byQuant))
	}
	for _, q := range DefaultQuantOrder() {
		p, ok, err := choose(q)
		if err != nil || ok {
			return p, err
		}
	}
	if len(all) == 1 {
		return all[0], nil
	}
	return "", fmt.Errorf("%w: no default quantization found; name one as hf:owner/repo:TAG (available: %s)", ErrInvalidRef, availableQuants(byQuant))
}

func availableQuants(byQuant map[string][]string) string {
	var qs []string
	for q, files := range byQuant {
		if q == "" {
			qs = append(qs, files...)
			continue
		}
		qs = append(qs, q)
	}
	slices.Sort(qs)
	return strings.Join(qs, ", ")
}

// Broken returns why a stored GGUF model cannot be used, judged from what
// its manifest recorded at import, or "" when nothing recorded there is past
// the header scan's bounds. A store written by an older modeld may hold such
// a model (that version took any block count); the bounds are checked again
// in full when the model is first used. It reads no file, so listings can
// call it for every model.
func (m *Manifest) Broken() string {
	if m == nil || m.GGUF == nil {
		return ""
	}
	g := m.GGUF
	for _, c := range []struct {
		what   string
		v, max uint64
	}{
		{"block_count", g.BlockCount, ggufscan.DefaultMaxBlockCount},
		{"context_length", g.ContextLength, ggufscan.DefaultMaxContext},
		{"embedding_length", g.EmbeddingLength, ggufscan.DefaultMaxEmbedding},
	} {
		if c.v > c.max {
			return fmt.Sprintf("%s.%s is %d, more than the limit of %d: the model cannot be loaded; remove it (modeld rm %s)", g.Architecture, c.what, c.v, c.max, m.ID)
		}
	}
	return ""
}
