package ollama

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"
	"os"
	"strings"

	"github.com/gin-gonic/gin"

	"github.com/modeld/modeld/api/core"
	"github.com/modeld/modeld/backends"
	"github.com/modeld/modeld/internal/ggufscan"
	"github.com/modeld/modeld/models"
)

// POST /api/show: a stored model's details, metadata, template and
// capabilities, read from the store without loading the model. For a GGUF
// model the header is read again (after the bounded scan every GGUF read
// starts with): its scalar metadata, its chat template and whether its
// vocabulary has fill-in-the-middle tokens, with bounds on what is kept.

// Bounds of what /api/show returns from a GGUF header.
const (
	showMaxTemplate = 1 << 20  // a longer chat template is not shown
	showMaxString   = 16 << 10 // a longer metadata string is left out of model_info
	showMaxStrings  = 1 << 20  // all metadata strings together
)

// ggufShow is what /api/show reads from a GGUF header.
type ggufShow struct {
	info     map[string]any // scalar keys by name; arrays as [] (Ollama's non-verbose form)
	template string         // tokenizer.chat_template, "" when absent or too long
	fim      bool           // the vocabulary has one of fimSpellings' sets
}

func (h *ollama) show(c *gin.Context) {
	m, _, ok := h.get(c)
	if !ok {
		return
	}
	info := map[string]any{}
	var tmpl string
	var fim bool
	if g := m.GGUF; g != nil {
		if st, err := h.store(); err == nil {
			if p, err := st.FilePath(m, g.File); err == nil {
				hdr, err := readGGUFShow(p)
				if err != nil {
					h.s.Log.Warn("ollama show: GGUF header unreadable", "model", m.ID, "err", err)
				} else {
					info, tmpl, fim = hdr.info, hdr.template, hdr.fim
				}
			}
		}
		arch := g.Architecture
		info["general.architecture"] = arch
		info["general.parameter_count"] = g.Parameters
		if g.Name != "" {
			info["general.name"] = g.Name
		}
		// The context modeld serves the model with (--context-size caps it).
		info[arch+".context_length"] = backends.EffectiveContext(int(min(g.ContextLength, math.MaxInt32)), h.s.ContextCap())
		if g.EmbeddingLength > 0 {
			info[arch+".embedding_length"] = g.EmbeddingLength
		}
		if g.BlockCount > 0 {
			info[arch+".block_count"] = g.BlockCount
		}
		if g.Tokenizer != "" {
			info["tokenizer.ggml.model"] = g.Tokenizer
		}
	}
	if o := m.ONNX; o != nil {
		info["general.architecture"] = o.ModelType
		if o.MaxLength > 0 {
			info[o.ModelType+".context_length"] = o.MaxLength
		}
	}
	c.JSON(http.StatusOK, gin.H{
		"modelfile":    "# modeld serves " + m.ID + " from its store; it uses no Modelfile\n",
		"parameters":   "",
		"template":     tmpl,
		"details":      ollamaDetails(m),
		"model_info":   info,
		"capabilities": showCapabilities(m, tmpl, fim),
		"modified_at":  m.Modified,
	})
}

// showCapabilities are Ollama's capability names for a stored model:
// completion for a chat model, tools when its template renders tools,
// thinking when it handles a <think> block, insert when its vocabulary has
// fill-in-the-middle tokens (what /api/generate's suffix needs), embedding
// for an embedding model.
func showCapabilities(m *models.Manifest, tmpl string, fim bool) []string {
	caps := []string{}
	for _, t := range m.Tasks {
		switch string(t) {
		case backends.TaskChat:
			caps = append(caps, "completion")
			if strings.Contains(tmpl, "tools") {
				caps = append(caps, "tools")
			}
			if strings.Contains(tmpl, "<think>") || strings.Contains(tmpl, "enable_thinking") {
				caps = append(caps, "thinking")
			}
			if fim {
				caps = append(caps, "insert")
			}
			if m.GGUF != nil && m.GGUF.Projector != "" {
				caps = append(caps, "vision") // imported with its projector
			}
		case backends.TaskEmbed:
			caps = append(caps, "embedding")
		}
	}
	return caps
}

// fimSpellings are the fill-in-the-middle token spellings (prefix, suffix,
// middle) by which llama.cpp finds a vocabulary's FIM tokens when the
// metadata names none. Only /api/show's view of an unloaded file reads
// them; a generation takes the tokens from the loaded model
// (backends.Infiller).
var fimSpellings = [][3]string{
	{"<|fim_prefix|>", "<|fim_suffix|>", "<|fim_middle|>"}, // Qwen2.5-Coder, StarCoder2
	{"<fim_prefix>", "<fim_suffix>", "<fim_middle>"},       // StarCoder, SantaCoder
	{"<｜fim▁begin｜>", "<｜fim▁hole｜>", "<｜fim▁end｜>"},       // DeepSeek-Coder
	{"<|fim▁begin|>", "<|fim▁hole|>", "<|fim▁end|>"},
}

// readGGUFShow reads the metadata of the GGUF file at path for /api/show.
// The bounded scan comes first, so every length read after it is known to
// fit the file and the scan's limits; strings beyond showMaxString (and
// beyond showMaxStrings in all) are skipped, not held, and the vocabulary
// is streamed past, compared with the fill-in-the-middle markers.
func readGGUFShow(path string) (*ggufShow, error) {
	if _, err := ggufscan.ScanFile(path); err != nil {
		return nil, err
	}
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close() //nolint:errcheck // read-only
	r := &ggufReader{br: bufio.NewReaderSize(f, 64<<10)}
	var magic [4]byte
	r.read(magic[:])
	r.u32() // version: the scan checked it
	r.u64() // tensor count
	n := r.u64()
	out := &ggufShow{info: map[string]any{}}
	fimWant := map[string]bool{}
	for _, set := range fimSpellings {
		for _, s := range set {
			fimWant[s] = true
		}
	}
	budget := showMaxStrings
	for i := uint64(0); i < n && r.err == nil; i++ {
		key, _ := r.strBounded(math.MaxInt) // the scan bounded its length
		typ := r.u32()
		switch {
		case typ == ggufString:
			limit := showMaxString
			if key == "tokenizer.chat_template" {
				limit = showMaxTemplate
			}
			v, kept := r.strBounded(min(limit, budget))
			if !kept {
				continue
			}
			if key == "tokenizer.chat_template" {
				out.template = v
				continue
			}
			budget -= len(v)
			out.info[key] = v
		case typ == ggufArray:
			elem, count := r.u32(), r.u64()
			if key == "tokenizer.ggml.tokens" && elem == ggufString {
				out.fim = r.vocabHasFIM(count, fimWant)
			} else {
				r.skipArray(elem, count)
			}
			out.info[key] = []any{}
		default:
			if v, ok := r.scalar(typ); ok {
				out.info[key] = v
			}
		}
	}
	if r.err != nil {
		return nil, fmt.Errorf("read GGUF metadata: %w", r.err)
	}
	return out, nil
}

// GGUF value types (gguf.h) that readGGUFShow tells apart.
const (
	ggufString = 8
	ggufArray  = 9
)

// ggufReader reads little-endian GGUF values; the first error sticks and
// every later read returns zero values.
type ggufReader struct {
	br  *bufio.Reader
	err error
	buf [8]byte
}

func (r *ggufReader) read(p []byte) {
	if r.err == nil {
		_, r.err = io.ReadFull(r.br, p)
	}
}

func (r *ggufReader) skip(n uint64) {
	for n > 0 && r.err == nil {
		k := int(min(n, 1<<30))
		_, r.err = r.br.Discard(k)
		n -= uint64(k)
	}
}

func (r *ggufReader) u32() uint32 {
	r.read(r.buf[:4])
	if r.err != nil {
		return 0
	}
	return binary.LittleEndian.Uint32(r.buf[:4])
}

func (r *ggufReader) u64() uint64 {
	r.read(r.buf[:8])
	if r.err != nil {
		return 0
	}
	return binary.LittleEndian.Uint64(r.buf[:8])
}

// strBounded reads a string of at most limit bytes; a longer one is skipped
// and kept is false.
func (r *ggufReader) strBounded(limit int) (s string, kept bool) {
	n := r.u64()
	if r.err != nil {
		return "", false
	}
	if n > uint64(limit) {
		r.skip(n)
		return "", false
	}
	b := make([]byte, n)
	r.read(b)
	return string(b), r.err == nil
}

// ggufScalarSize is the encoded size of the scalar types (0: not a scalar).
var ggufScalarSize = [...]uint64{0: 1, 1: 1, 2: 2, 3: 2, 4: 4, 5: 4, 6: 4, 7: 1, 8: 0, 9: 0, 10: 8, 11: 8, 12: 8}

// scalar reads a number or a boolean as JSON shows it.
func (r *ggufReader) scalar(typ uint32) (any, bool) {
	if int(typ) >= len(ggufScalarSize) || ggufScalarSize[typ] == 0 {
		r.err = errors.Join(r.err, fmt.Errorf("unexpected value type %d", typ))
		return nil, false
	}
	b := r.buf[:ggufScalarSize[typ]]
	r.read(b)
	if r.err != nil {
		return nil, false
	}
	le := binary.LittleEndian
	switch typ {
	case 0:
		return b[0], true
	case 1:
		return int8(b[0]), true
	case 2:
		return le.Uint16(b), true
	case 3:
		return int16(le.Uint16(b)), true
	case 4:
		return le.Uint32(b), true
	case 5:
		return int32(le.Uint32(b)), true
	case 6:
		f := math.Float32frombits(le.Uint32(b))
		if !core.Finite(float64(f)) {
			return nil, true
		}
		return f, true // JSON writes it with float32's digits (1e-05, not 9.99e-06)
	case 7:
		return b[0] != 0, true
	case 10:
		return le.Uint64(b), true
	case 11:
		return int64(le.Uint64(b)), true
	}
	return finiteOrNil(math.Float64frombits(le.Uint64(b))), true
}

// finiteOrNil is f, or nil for NaN and infinities (which JSON cannot carry).
func finiteOrNil(f float64) any {
	if !core.Finite(f) {
		return nil
	}
	return f
}

// skipArray skips count values of type elem (arrays are not nested: the
// scan refuses that).
func (r *ggufReader) skipArray(elem uint32, count uint64) {
	if elem == ggufString {
		for i := uint64(0); i < count && r.err == nil; i++ {
			r.skip(r.u64())
		}
		return
	}
	if int(elem) >= len(ggufScalarSize) || ggufScalarSize[elem] == 0 {
		r.err = errors.Join(r.err, fmt.Errorf("unexpected array type %d", elem))
		return
	}
	r.skip(count * ggufScalarSize[elem])
}

// vocabHasFIM streams past the vocabulary's count tokens and reports
// whether every marker of one of fimSpellings' sets is among them.
func (r *ggufReader) vocabHasFIM(count uint64, want map[string]bool) bool {
	seen := map[string]bool{}
	var small [32]byte
	for i := uint64(0); i < count && r.err == nil; i++ {
		n := r.u64()
		if n > uint64(len(small)) { // longer than any marker
			r.skip(n)
			continue
		}
		b := small[:n]
		r.read(b)
		if s := string(b); want[s] {
			seen[s] = true
		}
	}
	for _, set := range fimSpellings {
		if seen[set[0]] && seen[set[1]] && seen[set[2]] {
			return true
		}
	}
	return false
}
