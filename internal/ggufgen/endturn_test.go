package ggufgen

import (
	"math"
	"testing"
)

// filled returns the values of the named tensor of ts.
func filled(t *testing.T, ts []*tensor, name string) ([]float32, []uint64) {
	t.Helper()
	for _, x := range ts {
		if x.name == name {
			n := uint64(1)
			for _, d := range x.dims {
				n *= d
			}
			dst := make([]float32, n)
			x.fill(dst)
			return dst, x.dims
		}
	}
	t.Fatalf("no tensor %s", name)
	return nil, nil
}

// TestEndsTurnsKeepsTheEndChannelApart checks the end channel of an
// EndsTurns model: every embedding but a blank token's holds the constant
// there, no layer reads or writes it, and only the end token's output row
// reads it.
func TestEndsTurnsKeepsTheEndChannelApart(t *testing.T) {
	o := Options{Vocab: BPE, EndsTurns: true}.withDefaults()
	v := bpeVocab(o.VocabSize)
	v.end = int(v.eos)
	ts := tensors(o, v)
	e := uint64(o.Embd)
	ch := e - 1

	emb, _ := filled(t, ts, "token_embd.weight")
	blanks := 0
	for id, text := range v.tokens {
		got, want := emb[uint64(id)*e+ch], float32(endConstant)
		if blankToken(text) {
			want = 0
			blanks++
		}
		if got != want {
			t.Fatalf("token %d %q: end channel %g, want %g", id, text, got, want)
		}
	}
	if blanks == 0 {
		t.Fatal("the generated vocabulary has no blank token (Ġ, Ċ)")
	}
	for l := range o.Layers {
		for _, name := range []string{"attn_q", "attn_k", "attn_v", "ffn_gate", "ffn_up"} {
			w, dims := filled(t, ts, "blk."+string(rune('0'+l))+"."+name+".weight")
			for r := uint64(0); r < dims[1]; r++ {
				if w[r*dims[0]+ch] != 0 {
					t.Fatalf("layer %d %s row %d reads the end channel (%g)", l, name, r, w[r*dims[0]+ch])
				}
			}
		}
		for _, name := range []string{"attn_output", "ffn_down"} {
			w, dims := filled(t, ts, "blk."+string(rune('0'+l))+"."+name+".weight")
			for i, x := range w[ch*dims[0] : (ch+1)*dims[0]] {
				if x != 0 {
					t.Fatalf("layer %d %s writes the end channel from input %d (%g)", l, name, i, x)
				}
			}
		}
	}
	out, _ := filled(t, ts, "output.weight")
	for id := range v.tokens {
		x := out[uint64(id)*e+ch]
		if id == v.end && x <= 0 {
			t.Fatalf("end token %d: output weight %g on the end channel, want > 0", id, x)
		}
		if id != v.end && x != 0 {
			t.Fatalf("token %d reads the end channel (%g)", id, x)
		}
	}
}

// TestEndsTurnsEndProbability computes the next-token distribution from the
// generated output matrix for final states shaped as endWeight assumes (the
// end constant plus unit-variance noise scaled to endResidualVar, then
// RMS-normalised) and checks that the end token's probability is near
// 1/EndAfter, for a small and a large vocabulary.
func TestEndsTurnsEndProbability(t *testing.T) {
	for _, size := range []int{512, 8192} {
		o := Options{Vocab: BPE, VocabSize: size, EndsTurns: true, EndAfter: 50, LineAfter: 10}.withDefaults()
		v := bpeVocab(o.VocabSize)
		v.end, v.newline = int(v.eos), newlineToken(v.tokens)
		if v.newline < 0 {
			t.Fatal("the generated vocabulary has no new-line token")
		}
		out, _ := filled(t, tensors(o, v), "output.weight")
		e := o.Embd
		state := make([]float32, e)
		var mean, line float64
		const draws = 20
		for d := range draws {
			uniform(state, uint64(d), "state", math.Sqrt(endResidualVar))
			state[e-1] = endConstant
			var ss float64
			for _, x := range state {
				ss += float64(x) * float64(x)
			}
			rms := math.Sqrt(ss / float64(e))
			logits := make([]float64, len(v.tokens))
			top := math.Inf(-1)
			for id := range v.tokens {
				var l float64
				for j, x := range state {
					l += float64(out[id*e+j]) * float64(x) / rms
				}
				logits[id] = l
				top = max(top, l)
			}
			var z float64
			for _, l := range logits {
				z += math.Exp(l - top)
			}
			mean += math.Exp(logits[v.end]-top) / z / draws
			line += math.Exp(logits[v.newline]-top) / z / draws
		}
		want := 1 / float64(o.EndAfter)
		if mean < want/2 || mean > want*2 {
			t.Errorf("vocabulary of %d: end probability %.4f, want about %.4f", len(v.tokens), mean, want)
		}
		if wantLine := 1 / float64(o.LineAfter); line < wantLine/2 || line > wantLine*2 {
			t.Errorf("vocabulary of %d: new-line probability %.4f, want about %.4f", len(v.tokens), line, wantLine)
		}
		t.Logf("vocabulary of %d: end probability %.4f (want %.4f)", len(v.tokens), mean, want)
	}
}

func TestBlankToken(t *testing.T) {
	for s, want := range map[string]bool{
		"Ċ": true, "ĠĠ": true, "▁": true, "<0x0A>": true, " \n": true, "ĉĉ": true,
		"": false, "a": false, "Ġa": false, "▁the": false, "<0x41>": false, "<|im_end|>": false,
	} {
		if got := blankToken(s); got != want {
			t.Errorf("blankToken(%q) = %v, want %v", s, got, want)
		}
	}
}

func TestEndsTurnsNeedsAnEndToken(t *testing.T) {
	v := &Vocab{Model: "gpt2", Tokens: []string{"a", "b"}}
	if err := WriteVocabModel(discard{}, v, Options{EndsTurns: true}); err == nil {
		t.Fatal("EndsTurns with a vocabulary without eot or eos: no error")
	}
}

type discard struct{}

func (discard) Write(p []byte) (int, error) { return len(p), nil }

// TestWholeCharacters: byte-level tokens are whole characters when their
// bytes are valid UTF-8, and a piece of a split character is not.
func TestWholeCharacters(t *testing.T) {
	dec := byteDecoder()
	enc := byteEncoder()
	for _, c := range []struct {
		text string
		want bool
	}{
		{" hello", true}, {"\n", true}, {"é", true}, {"日本", true}, {"🙂", true},
		{"\xe6\x97", false}, {"\xa5", false}, {"a\xf0\x9f", false},
	} {
		if got := wholeCharacters(dec, encodeBytes(enc, c.text)); got != c.want {
			t.Errorf("%q: %v, want %v", c.text, got, c.want)
		}
	}
	if wholeCharacters(dec, "a\u4e00") {
		t.Error("a character outside the byte alphabet counted as whole")
	}
}
