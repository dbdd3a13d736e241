package ggufgen

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"strings"
)

// Vocab is a real tokenizer read from a GGUF (usually a vocabulary-only one,
// such as llama.cpp's ggml-vocab-*.gguf): every tokenizer.ggml.* key of the
// file, kept verbatim so a model written with WriteVocabModel tokenizes exactly
// like the model the vocabulary came from.
type Vocab struct {
	Model  string   // tokenizer.ggml.model ("llama", "gpt2", ...)
	Pre    string   // tokenizer.ggml.pre ("" when absent)
	Tokens []string // tokenizer.ggml.tokens
	Types  []int32  // tokenizer.ggml.token_type (nil when absent)
	// Dropped names the tokenizer.ggml.* arrays left out because the writer
	// has no encoding for their element type (bool, uint8, 64-bit).
	Dropped []string
	kvs     []kv // tokenizer.ggml.* in file order, chat template excluded
}

// ID returns the id of the token whose text is exactly s, or -1.
func (v *Vocab) ID(s string) int {
	for i, t := range v.Tokens {
		if t == s {
			return i
		}
	}
	return -1
}

// SpecialID returns the value of tokenizer.ggml.<name>_token_id (name is
// "bos", "eos", "eot", "unknown", "padding", ...), or -1 when the file has none.
func (v *Vocab) SpecialID(name string) int {
	key := "tokenizer.ggml." + name + "_token_id"
	for _, e := range v.kvs {
		if e.key != key {
			continue
		}
		switch x := e.value.(type) {
		case uint32:
			return int(x)
		case int32:
			return int(x)
		}
	}
	return -1
}

// Maximum sizes ReadVocab accepts, far above any real vocabulary.
const (
	maxVocabKV     = 1 << 12
	maxVocabArray  = 1 << 22
	maxVocabString = 16 << 20
)

// ReadVocab reads the tokenizer.ggml.* keys of the GGUF at path. It reads the
// metadata only (never tensor data) and fails on a file without
// tokenizer.ggml.model and tokenizer.ggml.tokens.
func ReadVocab(path string) (*Vocab, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("ggufgen: %w", err)
	}
	defer f.Close()
	v, err := readVocab(bufio.NewReaderSize(f, 1<<20))
	if err != nil {
		return nil, fmt.Errorf("ggufgen: read vocabulary %s: %w", path, err)
	}
	return v, nil
}

func readVocab(r io.Reader) (*Vocab, error) {
	g := &ggufReader{r: r}
	if magic := g.bytes(4); g.err == nil && string(magic) != "GGUF" {
		return nil, errors.New("not a GGUF file")
	}
	if ver := g.u32(); g.err == nil && ver != 3 && ver != 2 {
		return nil, fmt.Errorf("GGUF version %d (want 2 or 3)", ver)
	}
	g.u64() // tensor count
	nkv := g.u64()
	if g.err == nil && nkv > maxVocabKV {
		return nil, fmt.Errorf("%d metadata keys", nkv)
	}
	v := &Vocab{}
	for i := uint64(0); i < nkv && g.err == nil; i++ {
		key := g.str()
		val := g.value(g.u32(), true)
		if g.err != nil || !strings.HasPrefix(key, "tokenizer.ggml.") {
			continue
		}
		if _, ok := val.(droppedArray); ok {
			v.Dropped = append(v.Dropped, key)
			continue
		}
		switch x := val.(type) {
		case string:
			switch key {
			case "tokenizer.ggml.model":
				v.Model = x
			case "tokenizer.ggml.pre":
				v.Pre = x
			}
		case []string:
			if key == "tokenizer.ggml.tokens" {
				v.Tokens = x
			}
		case []int32:
			if key == "tokenizer.ggml.token_type" {
				v.Types = x
			}
		}
		v.kvs = append(v.kvs, kv{key, val})
	}
	if g.err != nil {
		return nil, g.err
	}
	if v.Model == "" || len(v.Tokens) == 0 {
		return nil, errors.New("no tokenizer.ggml.model or tokenizer.ggml.tokens")
	}
	if v.Types != nil && len(v.Types) != len(v.Tokens) {
		return nil, fmt.Errorf("%d token types for %d tokens", len(v.Types), len(v.Tokens))
	}
	return v, nil
}

// ggufReader decodes GGUF metadata values into the types the writer takes:
// 8-, 16- and 32-bit integers become uint32 or int32.
type ggufReader struct {
	r   io.Reader
	err error
}

func (g *ggufReader) bytes(n uint64) []byte {
	if g.err != nil {
		return nil
	}
	b := make([]byte, n)
	if _, err := io.ReadFull(g.r, b); err != nil {
		g.err = fmt.Errorf("truncated: %w", err)
		return nil
	}
	return b
}

func (g *ggufReader) u32() uint32 {
	b := g.bytes(4)
	if b == nil {
		return 0
	}
	return binary.LittleEndian.Uint32(b)
}

func (g *ggufReader) u64() uint64 {
	b := g.bytes(8)
	if b == nil {
		return 0
	}
	return binary.LittleEndian.Uint64(b)
}

func (g *ggufReader) str() string {
	n := g.u64()
	if g.err == nil && n > maxVocabString {
		g.err = fmt.Errorf("string of %d bytes", n)
	}
	return string(g.bytes(n))
}

// scalar reads one value of type typ (not an array).
func (g *ggufReader) scalar(typ uint32) any {
	switch typ {
	case 0: // uint8
		b := g.bytes(1)
		if b == nil {
			return nil
		}
		return uint32(b[0])
	case 1: // int8
		b := g.bytes(1)
		if b == nil {
			return nil
		}
		return int32(int8(b[0]))
	case 2: // uint16
		b := g.bytes(2)
		if b == nil {
			return nil
		}
		return uint32(binary.LittleEndian.Uint16(b))
	case 3: // int16
		b := g.bytes(2)
		if b == nil {
			return nil
		}
		return int32(int16(binary.LittleEndian.Uint16(b)))
	case typeUint32:
		return g.u32()
	case typeInt32:
		return int32(g.u32())
	case typeFloat32:
		return math.Float32frombits(g.u32())
	case typeBool:
		b := g.bytes(1)
		if b == nil {
			return nil
		}
		return b[0] != 0
	case typeString:
		return g.str()
	}
	if g.err == nil {
		g.err = fmt.Errorf("unsupported metadata value type %d", typ)
	}
	return nil
}

// value reads a value of type typ; arrays become []string, []int32, []float32
// (other element types are refused).
func (g *ggufReader) value(typ uint32, top bool) any {
	if typ != typeArray {
		return g.scalar(typ)
	}
	et, n := g.u32(), g.u64()
	if g.err != nil {
		return nil
	}
	if !top || n > maxVocabArray {
		g.err = fmt.Errorf("array of %d elements of type %d", n, et)
		return nil
	}
	switch et {
	case typeString:
		out := make([]string, n)
		for i := range out {
			out[i] = g.str()
		}
		return out
	case typeInt32, 1, 3:
		out := make([]int32, n)
		for i := range out {
			out[i], _ = g.scalar(et).(int32)
		}
		return out
	case typeFloat32:
		out := make([]float32, n)
		for i := range out {
			out[i] = math.Float32frombits(g.u32())
		}
		return out
	}
	size := map[uint32]uint64{0: 1, 1: 1, 2: 2, 3: 2, typeUint32: 4, typeBool: 1, 10: 8, 11: 8, 12: 8}[et]
	if size == 0 {
		g.err = fmt.Errorf("unsupported array element type %d", et)
		return nil
	}
	g.bytes(n * size)
	return droppedArray{}
}

// droppedArray stands for an array whose element type the writer cannot write;
// ReadVocab leaves such keys out and names them in Vocab.Dropped.
type droppedArray struct{}

// WriteVocabModelFile writes to path the llama-architecture model of
// WriteVocabModel.
func WriteVocabModelFile(path string, v *Vocab, o Options) (err error) {
	f, err := os.Create(path)
	if err != nil {
		return fmt.Errorf("ggufgen: %w", err)
	}
	defer func() {
		if cerr := f.Close(); cerr != nil && err == nil {
			err = fmt.Errorf("ggufgen: %w", cerr)
		}
	}()
	return WriteVocabModel(f, v, o)
}

// WriteVocabModel writes a llama-architecture model with random weights of o's
// shape (Embd, Layers, Heads, HeadsKV, FF, Context, Type, Seed; Vocab and
// VocabSize are ignored) that carries v's tokenizer verbatim and o.Template as
// tokenizer.chat_template (a real template read from a .jinja file; "" means
// ChatMLTemplate, NoTemplate leaves it out). The token embedding and output
// matrices have one row per token of v: with a 150k vocabulary and Embd 64,
// F16 makes them ~19 MB each. Tokens that are not normal text (control, byte,
// unused, user-defined) get a zero output row, so greedy decoding emits text;
// with o.EndsTurns the end token is the vocabulary's eot, else its eos;
// o.WholeCharacters silences the pieces of split characters too.
func WriteVocabModel(w io.Writer, v *Vocab, o Options) error {
	if o.Name == "" {
		o.Name = "modeld-test-" + v.Model
		if v.Pre != "" {
			o.Name += "-" + v.Pre
		}
	}
	o = o.withDefaults()
	if err := o.validate(); err != nil {
		return err
	}
	tv := &vocab{tokens: v.Tokens, end: v.SpecialID("eot"), newline: newlineToken(v.Tokens)}
	if tv.end < 0 {
		tv.end = v.SpecialID("eos")
	}
	if o.EndsTurns && (tv.end < 0 || tv.end >= len(v.Tokens)) {
		return errors.New("ggufgen: EndsTurns needs a vocabulary with an eot or eos token")
	}
	var dec map[rune]byte
	if o.WholeCharacters && v.Model == "gpt2" {
		dec = byteDecoder()
	}
	for id, tok := range v.Tokens {
		typ := tokNormal
		if id < len(v.Types) {
			typ = v.Types[id]
		}
		if typ != tokNormal || dec != nil && !wholeCharacters(dec, tok) {
			tv.silence = append(tv.silence, id)
		}
	}
	kvs := append(architectureKVs(o, len(v.Tokens)), v.kvs...)
	if !o.NoTemplate {
		kvs = append(kvs, kv{"tokenizer.chat_template", o.Template})
	}
	return writeGGUF(w, kvs, tensors(o, tv))
}
