package ggufgen

import (
	"errors"
	"fmt"
	"hash/fnv"
	"io"
	"math"
	"os"
)

// VocabKind selects the tokenizer of a generated model.
type VocabKind int

const (
	// SPM is a SentencePiece vocabulary (tokenizer.ggml.model = "llama") with
	// byte tokens <0xXX> as fallback.
	SPM VocabKind = iota
	// BPE is a byte-level BPE vocabulary (tokenizer.ggml.model = "gpt2") with
	// merges.
	BPE
)

func (k VocabKind) String() string {
	switch k {
	case SPM:
		return "spm"
	case BPE:
		return "bpe"
	}
	return fmt.Sprintf("VocabKind(%d)", int(k))
}

// ParseVocabKind parses "spm" or "bpe".
func ParseVocabKind(s string) (VocabKind, error) {
	switch s {
	case "spm":
		return SPM, nil
	case "bpe":
		return BPE, nil
	}
	return 0, fmt.Errorf("ggufgen: unknown vocabulary kind %q (want spm or bpe)", s)
}

// TensorType is the storage type of the weight matrices (norms are always F32).
type TensorType int

const (
	F32 TensorType = iota
	F16
)

// ChatMLTemplate is the ChatML chat template that llama.cpp's built-in
// template matcher recognises.
const ChatMLTemplate = "{% for message in messages %}" +
	"{{'<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>' + '\\n'}}" +
	"{% endfor %}" +
	"{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}"

// Options describe a generated llama-architecture model. Zero fields take the
// defaults of Tiny.
type Options struct {
	Vocab VocabKind
	// VocabSize is the approximate vocabulary size, grown with letter pairs
	// and triples; the base vocabulary (specials, bytes, characters, words:
	// ~670 tokens SPM, ~800 BPE) is always there (default 512, i.e. the base).
	VocabSize int
	Embd      int // embedding width (default 64)
	Layers    int // transformer blocks (default 2)
	Heads     int // attention heads (default 4)
	HeadsKV   int // key/value heads (default Heads)
	FF        int // feed-forward width (default 2*Embd)
	Context   int // trained context length, llama.context_length (default 2048)
	Type      TensorType
	Seed      uint64
	// Template is tokenizer.chat_template; "" means ChatMLTemplate.
	Template string
	// NoTemplate leaves tokenizer.chat_template out of the file.
	NoTemplate bool
	// Name is general.name (default "modeld-test-<vocab>").
	Name string
	// EndsTurns makes sampled answers end, as a trained model's do (random
	// weights never draw the end token, so every answer runs to its token
	// limit). Every token embedding carries a constant in the last dimension,
	// which the layers neither read nor write, and only the end token's
	// output row reads it: at temperature 1 the end token is drawn with a
	// probability of about 1/EndAfter at each step, so answers end after a
	// few tens of tokens (greedy decoding ends at once). The end token is the
	// vocabulary's end-of-turn token when it has one, else its eos.
	EndsTurns bool
	// EndAfter is the mean answer length of EndsTurns, in tokens (default 60).
	EndAfter int
	// LineAfter, with EndsTurns, makes the new-line token read the end
	// channel too, so that it is drawn with a probability of about
	// 1/LineAfter at each step: lines end, as the lines of a patch or a
	// grammar's free-text fields must for the text to finish (0: off).
	LineAfter int
	// Raise lifts the logits of these token ids by about the given amount
	// at every position: every token embedding carries a constant in
	// dimension 0, and these tokens' output rows read it. Random weights
	// then favour them, so that a test model ends what the grammar lets
	// it end (lines, sections, a turn when EOS is raised).
	Raise map[int]float32
	// WholeCharacters, for a model written with a real byte-level BPE
	// vocabulary (WriteVocabModel), also gives a zero output row to the
	// tokens whose bytes are not valid UTF-8 on their own (the pieces of a
	// character that the vocabulary splits across tokens), so that greedy
	// output is valid UTF-8 text, as a trained model's is: a server that
	// parses its output as text (llama-server does) then accepts it. The
	// matrices keep their size, so a token reads as many bytes as before.
	WholeCharacters bool
}

// Tiny returns the options of a test model of under 1 MB: 64 wide, 2 layers,
// the base vocabulary, F32.
func Tiny(v VocabKind) Options {
	return Options{Vocab: v}.withDefaults()
}

// Bench returns the options of the benchmark model: F16, ~35 MB.
func Bench(v VocabKind) Options {
	return Options{
		Vocab: v, VocabSize: 2048, Embd: 512, Layers: 6, Heads: 8, FF: 1024,
		Context: 4096, Type: F16,
	}.withDefaults()
}

func (o Options) withDefaults() Options {
	if o.VocabSize == 0 {
		o.VocabSize = 512
	}
	if o.Embd == 0 {
		o.Embd = 64
	}
	if o.Layers == 0 {
		o.Layers = 2
	}
	if o.Heads == 0 {
		o.Heads = 4
	}
	if o.HeadsKV == 0 {
		o.HeadsKV = o.Heads
	}
	if o.FF == 0 {
		o.FF = 2 * o.Embd
	}
	if o.Context == 0 {
		o.Context = 2048
	}
	if o.Template == "" {
		o.Template = ChatMLTemplate
	}
	if o.Name == "" {
		o.Name = "modeld-test-" + o.Vocab.String()
	}
	if o.EndAfter == 0 {
		o.EndAfter = 60
	}
	return o
}

func (o Options) validate() error {
	var errs []error
	if o.Vocab != SPM && o.Vocab != BPE {
		errs = append(errs, fmt.Errorf("unknown vocabulary kind %d", int(o.Vocab)))
	}
	if o.Type != F32 && o.Type != F16 {
		errs = append(errs, fmt.Errorf("unknown tensor type %d", int(o.Type)))
	}
	for name, n := range map[string]int{"Embd": o.Embd, "Layers": o.Layers, "Heads": o.Heads,
		"HeadsKV": o.HeadsKV, "FF": o.FF, "Context": o.Context, "VocabSize": o.VocabSize, "EndAfter": o.EndAfter} {
		if n < 0 {
			errs = append(errs, fmt.Errorf("%s is negative (%d)", name, n))
		}
	}
	if o.Heads > 0 && o.Embd%o.Heads != 0 {
		errs = append(errs, fmt.Errorf("Embd %d is not a multiple of Heads %d", o.Embd, o.Heads))
	} else if o.Heads > 0 && (o.Embd/o.Heads)%2 != 0 {
		errs = append(errs, fmt.Errorf("head width %d must be even for RoPE", o.Embd/o.Heads))
	}
	if o.EndsTurns && (o.EndAfter < 2 || o.Embd < 8) {
		errs = append(errs, fmt.Errorf("EndsTurns needs EndAfter >= 2 (%d) and Embd >= 8 (%d)", o.EndAfter, o.Embd))
	}
	if o.LineAfter != 0 && (!o.EndsTurns || o.LineAfter < 2) {
		errs = append(errs, fmt.Errorf("LineAfter %d needs EndsTurns and at least 2", o.LineAfter))
	}
	if o.HeadsKV > 0 && o.Heads%o.HeadsKV != 0 {
		errs = append(errs, fmt.Errorf("Heads %d is not a multiple of HeadsKV %d", o.Heads, o.HeadsKV))
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("ggufgen: invalid options: %w", err)
	}
	return nil
}

// WriteFile writes the model described by o to path.
func WriteFile(path string, o Options) error {
	return writeFile(path, func(w io.Writer) error { return Write(w, o) })
}

// writeFile creates path and writes it with write, reporting a failed close.
func writeFile(path string, write func(io.Writer) error) (err error) {
	f, err := os.Create(path)
	if err != nil {
		return fmt.Errorf("ggufgen: %w", err)
	}
	defer func() {
		if cerr := f.Close(); cerr != nil && err == nil {
			err = fmt.Errorf("ggufgen: %w", cerr)
		}
	}()
	return write(f)
}

// Write writes the model described by o to w. The same options always give
// the same bytes.
func Write(w io.Writer, o Options) error {
	o = o.withDefaults()
	if err := o.validate(); err != nil {
		return err
	}
	var v *vocab
	if o.Vocab == BPE {
		v = bpeVocab(o.VocabSize)
	} else {
		v = spmVocab(o.VocabSize)
	}
	v.end, v.newline = int(v.eos), newlineToken(v.tokens)
	return writeGGUF(w, metadata(o, v), tensors(o, v))
}

// architectureKVs is the llama architecture's metadata of a model with o's
// shape and a vocabulary of vocabSize tokens: what every generated model
// carries before its tokenizer.
func architectureKVs(o Options, vocabSize int) []kv {
	fileType := uint32(0)
	if o.Type == F16 {
		fileType = 1
	}
	return []kv{
		{"general.architecture", "llama"},
		{"general.name", o.Name},
		{"general.file_type", fileType},
		{"llama.context_length", uint32(o.Context)},
		{"llama.embedding_length", uint32(o.Embd)},
		{"llama.block_count", uint32(o.Layers)},
		{"llama.feed_forward_length", uint32(o.FF)},
		{"llama.attention.head_count", uint32(o.Heads)},
		{"llama.attention.head_count_kv", uint32(o.HeadsKV)},
		{"llama.attention.layer_norm_rms_epsilon", float32(1e-5)},
		{"llama.rope.dimension_count", uint32(o.Embd / o.Heads)},
		{"llama.rope.freq_base", float32(10000)},
		{"llama.vocab_size", uint32(vocabSize)},
	}
}

func metadata(o Options, v *vocab) []kv {
	kvs := append(architectureKVs(o, len(v.tokens)), kv{"tokenizer.ggml.model", v.model})
	if v.model == "gpt2" {
		kvs = append(kvs, kv{"tokenizer.ggml.pre", "gpt-2"})
	}
	kvs = append(kvs,
		kv{"tokenizer.ggml.tokens", v.tokens},
		kv{"tokenizer.ggml.token_type", v.types},
	)
	if v.scores != nil {
		kvs = append(kvs, kv{"tokenizer.ggml.scores", v.scores})
	}
	if v.merges != nil {
		kvs = append(kvs, kv{"tokenizer.ggml.merges", v.merges})
	}
	kvs = append(kvs,
		kv{"tokenizer.ggml.bos_token_id", v.bos},
		kv{"tokenizer.ggml.eos_token_id", v.eos},
	)
	if v.unk >= 0 {
		kvs = append(kvs, kv{"tokenizer.ggml.unknown_token_id", uint32(v.unk)})
	}
	kvs = append(kvs,
		kv{"tokenizer.ggml.add_bos_token", v.model == "llama"},
		kv{"tokenizer.ggml.add_eos_token", false},
	)
	if !o.NoTemplate {
		kvs = append(kvs, kv{"tokenizer.chat_template", o.Template})
	}
	return kvs
}

// tensors lists the llama tensors with deterministic uniform weights. The
// scales keep every layer's output of order one and give the output
// projection logits with a spread of a few units, so greedy decoding wanders
// through the vocabulary instead of repeating one token. Control and byte
// tokens get a zero output row: greedy decoding never picks them. With
// o.EndsTurns the last dimension is the end channel (endChannel).
func tensors(o Options, v *vocab) []*tensor {
	typ := ggmlF32
	if o.Type == F16 {
		typ = ggmlF16
	}
	nv := uint64(len(v.tokens))
	e, ff := uint64(o.Embd), uint64(o.FF)
	kvDim := e / uint64(o.Heads) * uint64(o.HeadsKV)
	inv := 1 / math.Sqrt(float64(o.Embd))
	ch := endChannel{on: o.EndsTurns, dim: e - 1}
	ones := func(dst []float32) {
		for i := range dst {
			dst[i] = 1
		}
	}
	// rnd fills a d0×d1 matrix (d0 innermost: the input); blind keeps the
	// end channel out of its input, mute out of its output.
	rnd := func(name string, std float64, d0 uint64, blind, mute bool) func([]float32) {
		return func(dst []float32) {
			uniform(dst, o.Seed, name, std)
			if blind {
				ch.blind(dst, d0)
			}
			if mute {
				ch.mute(dst, d0)
			}
		}
	}
	out := func(dst []float32) {
		uniform(dst, o.Seed, "output.weight", 3*inv)
		for _, id := range v.silence {
			clear(dst[uint64(id)*e : uint64(id+1)*e])
		}
		ch.blind(dst, e)
		if ch.on {
			dst[uint64(v.end)*e+ch.dim] = float32(ch.weight(o, v, o.EndAfter))
			if o.LineAfter > 0 && v.newline >= 0 {
				dst[uint64(v.newline)*e+ch.dim] = float32(ch.weight(o, v, o.LineAfter))
			}
		}
		for id, lift := range o.Raise {
			if id >= 0 && uint64(id) < nv {
				// dimension 0 of the normed hidden state is about raiseNormed
				dst[uint64(id)*e] = lift / raiseNormed
			}
		}
	}
	embd := func(dst []float32) {
		uniform(dst, o.Seed, "token_embd.weight", 1)
		if ch.on {
			for t, text := range v.tokens {
				dst[uint64(t)*e+ch.dim] = endConstant
				if blankToken(text) {
					dst[uint64(t)*e+ch.dim] = 0
				}
			}
		}
		if len(o.Raise) > 0 {
			for t := uint64(0); t < nv; t++ {
				dst[t*e] = raiseConst
			}
		}
	}
	ts := []*tensor{
		{name: "token_embd.weight", dims: []uint64{e, nv}, typ: typ, fill: embd},
		{name: "output_norm.weight", dims: []uint64{e}, typ: ggmlF32, fill: ones},
		{name: "output.weight", dims: []uint64{e, nv}, typ: typ, fill: out},
	}
	for l := 0; l < o.Layers; l++ {
		p := fmt.Sprintf("blk.%d.", l)
		mat := func(name string, d0, d1 uint64, std float64, blind, mute bool) *tensor {
			return &tensor{name: p + name, dims: []uint64{d0, d1}, typ: typ, fill: rnd(p+name, std, d0, blind, mute)}
		}
		ts = append(ts,
			&tensor{name: p + "attn_norm.weight", dims: []uint64{e}, typ: ggmlF32, fill: ones},
			mat("attn_q.weight", e, e, 2*inv, true, false),
			mat("attn_k.weight", e, kvDim, 2*inv, true, false),
			mat("attn_v.weight", e, kvDim, inv, true, false),
			mat("attn_output.weight", e, e, inv, false, true),
			&tensor{name: p + "ffn_norm.weight", dims: []uint64{e}, typ: ggmlF32, fill: ones},
			mat("ffn_gate.weight", e, ff, inv, true, false),
			mat("ffn_up.weight", e, ff, inv, true, false),
			mat("ffn_down.weight", ff, e, 1/math.Sqrt(float64(o.FF)), false, true),
		)
	}
	return ts
}

// raiseConst is dimension 0 of every token embedding of a model with Raise,
// and raiseNormed about what the final norm makes of it (the other
// dimensions and the layers' outputs are of order one).
const (
	raiseConst  = 4
	raiseNormed = 3
)

// uniform fills dst with values uniform in [-std√3, std√3] (standard
// deviation std) from a splitmix64 stream keyed by seed and tensor name, so a
// tensor's values do not depend on the order tensors are written in.
func uniform(dst []float32, seed uint64, name string, std float64) {
	h := fnv.New64a()
	h.Write([]byte(name))
	state := seed ^ h.Sum64()
	a := std * math.Sqrt(3)
	for i := range dst {
		state += 0x9e3779b97f4a7c15
		z := state
		z = (z ^ z>>30) * 0xbf58476d1ce4e5b9
		z = (z ^ z>>27) * 0x94d049bb133111eb
		z ^= z >> 31
		u := float64(z>>11) / (1 << 53) // [0, 1)
		dst[i] = float32((2*u - 1) * a)
	}
}
