package engine

import (
	"encoding/json"
	"math"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	yz "github.com/hybridgroup/yzma/pkg/llama"
	"github.com/santhosh-tekuri/jsonschema/v6"

	"github.com/modeld/modeld/backends/llama/grammar"
	"github.com/modeld/modeld/internal/ggufgen"
	"github.com/modeld/modeld/internal/testenv"
)

// openPath opens the model at path for the test and closes it at the end.
func openPath(t testing.TB, path string, opts Options) *Model {
	t.Helper()
	initLib(t)
	m, err := Open(path, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := m.Close(); err != nil {
			t.Errorf("close: %v", err)
		}
	})
	return m
}

// constrainedRun drives a decoder of its own over m: it evaluates prompt
// and samples up to max tokens under c and samp, the grammar first over
// every candidate (maskFirst, the reference) or sampling first; the
// tokens, up to the end of generation (not included).
func constrainedRun(t testing.TB, m *Model, prompt []int32, c constraint, samp Sampling, max int, maskFirst bool) []yz.Token {
	t.Helper()
	d, err := newLlamaDecoder(m, Options{Slots: 1, Threads: 1, BatchThreads: 2}, 512, 1024)
	if err != nil {
		t.Fatal(err)
	}
	defer d.close()
	d.maskFirst = maskFirst
	d.startSeq(0, samp, c)
	var batch []batchToken
	for i, tok := range prompt {
		batch = append(batch, batchToken{tok: yz.Token(tok), pos: i, logits: i == len(prompt)-1})
	}
	if err := d.decode(batch); err != nil {
		t.Fatal(err)
	}
	var out []yz.Token
	pos, logit := len(prompt), int32(len(prompt)-1)
	for range max {
		tok := d.sample(0, logit)
		if d.isEOG(tok) {
			break
		}
		out = append(out, tok)
		if err := d.decode([]batchToken{{tok: tok, pos: pos, logits: true}}); err != nil {
			t.Fatal(err)
		}
		pos, logit = pos+1, 0
	}
	return out
}

// schemaConstraint is the grammar of schema as a constraint.
func schemaConstraint(t testing.TB, schema string) constraint {
	t.Helper()
	g, err := grammar.FromSchema(json.RawMessage(schema), grammar.Options{})
	if err != nil {
		t.Fatal(err)
	}
	return constraint{text: g}
}

// TestSampleFirstGreedySame: greedy under a JSON schema's grammar gives
// the same tokens sampling first as with the grammar over every candidate
// first, on a random-weight model with Qwen 2.5's real vocabulary of 151k
// tokens and template and on the trained stories260K; and the output
// validates against the schema.
func TestSampleFirstGreedySame(t *testing.T) {
	const schema = `{"type":"object","properties":{"name":{"type":"string","maxLength":12},"age":{"type":"integer","minimum":0,"maximum":150}},"required":["name","age"],"additionalProperties":false}`
	v := schemaValidator(t, "person", schema)
	c := schemaConstraint(t, schema)
	for _, tc := range []struct {
		name string
		path func(t *testing.T) string
	}{
		{"qwen2.5", func(t *testing.T) string { return testenv.LlamaChatModel(t, "qwen2", "Qwen-Qwen2.5-7B-Instruct") }},
		{"stories260K", trainedModel},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := openPath(t, tc.path(t), Options{ContextSize: 1024})
			prompt := tokenize(t, m, "Once upon a time, a person in JSON:")
			for _, bias := range []map[int32]float32{nil, closingBias(m)} {
				samp := Sampling{LogitBias: bias}
				want := constrainedRun(t, m, prompt, c, samp, 120, true)
				got := constrainedRun(t, m, prompt, c, samp, 120, false)
				if !slices.Equal(got, want) {
					t.Fatalf("bias %v: sampling first gave\n%v\nthe grammar first\n%v", bias != nil, got, want)
				}
				if len(got) == 0 {
					t.Fatal("no tokens")
				}
				text := detok(m, got)
				t.Logf("bias %v: %d tokens: %q", bias != nil, len(got), text)
				if len(got) < 120 { // ended on its own: the object is complete
					inst, err := jsonschema.UnmarshalJSON(strings.NewReader(text))
					if err != nil {
						t.Fatalf("output is not JSON: %v\n%q", err, text)
					}
					if err := v.Validate(inst); err != nil {
						t.Fatalf("output fails the schema: %v\n%q", err, text)
					}
				} else if !strings.HasPrefix(text, "{") {
					t.Fatalf("output %q does not open the object", text)
				}
			}
		})
	}
}

func detok(m *Model, toks []yz.Token) string {
	var b strings.Builder
	for _, tok := range toks {
		b.WriteString(m.piece(tok, false))
	}
	return b.String()
}

// TestSampleFirstDistribution: the first token drawn under a grammar,
// over many seeds, follows the masked distribution p(t)/Z that the model's
// logits give (computed here from them), sampling first as with the
// grammar first; under top-k the masked distribution is that of the k most
// likely tokens (the order constrain.go documents), and where those k hold
// no allowed token it is the grammar first, then the k most likely of
// what it allows.
func TestSampleFirstDistribution(t *testing.T) {
	m := openModel(t, ggufgen.Tiny(ggufgen.BPE), Options{ContextSize: 512})
	prompt := tokenize(t, m, "Hello there")
	for _, tc := range []struct {
		name, gbnf string
		topK       int
	}{
		{"wide", `root ::= [a-m] [a-z]*`, 0}, // most draws accepted
		{"narrow", `root ::= [x-z]`, 0},      // most draws rejected
		{"top-k", `root ::= [a-m] [a-z]*`, 60},
		{"top-k none allowed", `root ::= [x-z]`, 3},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := constraint{text: tc.gbnf}
			d, err := newLlamaDecoder(m, Options{Slots: 1, Threads: 1, BatchThreads: 2}, 512, 512)
			if err != nil {
				t.Fatal(err)
			}
			defer d.close()
			var batch []batchToken
			for i, tok := range prompt {
				batch = append(batch, batchToken{tok: yz.Token(tok), pos: i, logits: i == len(prompt)-1})
			}
			if err := d.decode(batch); err != nil {
				t.Fatal(err)
			}
			logits, err := yz.GetLogitsIth(d.lctx, -1, m.nVocab)
			if err != nil {
				t.Fatal(err)
			}
			logits = slices.Clone(logits)
			g := yz.SamplerInitGrammar(m.vocab, tc.gbnf, grammarRoot)
			defer yz.SamplerFree(g)
			allowed := make([]bool, m.nVocab)
			for id := range allowed {
				allowed[id] = allows(g, yz.Token(id))
			}
			first := maskedDistribution(logits, allowed, tc.topK)
			if len(first) < 2 {
				t.Fatalf("the test grammar allows %d tokens", len(first))
			}
			for _, maskFirst := range []bool{true, false} {
				d.maskFirst = maskFirst
				want := first
				if maskFirst {
					want = grammarFirstDistribution(logits, allowed, tc.topK)
				}
				const n = 12000
				got := map[yz.Token]float64{}
				for seed := range int64(n) {
					d.startSeq(0, Sampling{Temperature: 1, TopK: tc.topK, Seed: &seed}, c)
					got[d.sample(0, int32(len(prompt)-1))] += 1.0 / n
					d.endSeq(0)
				}
				var tv float64
				for tok, p := range got {
					if _, ok := want[tok]; !ok {
						t.Fatalf("maskFirst %v: drew %d (%q), which the distribution does not hold", maskFirst, tok, m.piece(tok, false))
					}
					tv += math.Abs(p - want[tok])
				}
				for tok, p := range want {
					if _, ok := got[tok]; !ok {
						tv += p
					}
				}
				tv /= 2
				t.Logf("maskFirst %v: %d tokens possible, %d drawn, total variation %.4f", maskFirst, len(want), len(got), tv)
				if tv > 0.06 {
					t.Fatalf("maskFirst %v: total variation %.4f from the masked distribution", maskFirst, tv)
				}
			}
		})
	}
}

// maskedDistribution is the distribution of softmax(logits) over the
// allowed tokens among the topK most likely (all with 0), renormalized;
// where those hold none allowed, over the topK most likely allowed ones.
func maskedDistribution(logits []float32, allowed []bool, topK int) map[yz.Token]float64 {
	return distribution(logits, allowed, topK, false)
}

// grammarFirstDistribution is that of the reference order: softmax(logits)
// over the topK most likely allowed tokens.
func grammarFirstDistribution(logits []float32, allowed []bool, topK int) map[yz.Token]float64 {
	return distribution(logits, allowed, topK, true)
}

func distribution(logits []float32, allowed []bool, topK int, grammarFirst bool) map[yz.Token]float64 {
	ids := make([]int, len(logits))
	for i := range ids {
		ids[i] = i
	}
	slices.SortStableFunc(ids, func(a, b int) int {
		switch {
		case logits[a] > logits[b]:
			return -1
		case logits[a] < logits[b]:
			return 1
		}
		return 0
	})
	pick := func(ids []int) []int {
		var out []int
		for _, id := range ids {
			if allowed[id] {
				out = append(out, id)
			}
		}
		return out
	}
	keep := ids
	if topK > 0 {
		keep = ids[:topK]
	}
	set := pick(keep)
	if len(set) == 0 || grammarFirst {
		set = pick(ids)
		if topK > 0 && len(set) > topK {
			set = set[:topK]
		}
	}
	hi := math.Inf(-1)
	for _, id := range set {
		hi = math.Max(hi, float64(logits[id]))
	}
	var z float64
	for _, id := range set {
		z += math.Exp(float64(logits[id]) - hi)
	}
	out := map[yz.Token]float64{}
	for _, id := range set {
		out[yz.Token(id)] = math.Exp(float64(logits[id])-hi) / z
	}
	return out
}

// BenchmarkGrammarSample is the time of one draw under a JSON schema's
// grammar on a random-weight model with Qwen 2.5's vocabulary of 151,665
// tokens, with the grammar over every candidate first (the reference
// order) and sampling first, greedy and at temperature 1: "person" (a
// short object, mostly structure) and "text" (one long string). Each
// iteration generates up to 64 tokens; sample-ns/token excludes the decode.
func BenchmarkGrammarSample(b *testing.B) {
	m := openPath(b, testenv.LlamaChatModel(b, "qwen2", "Qwen-Qwen2.5-7B-Instruct"), Options{ContextSize: 1024})
	prompt := tokenize(b, m, "An answer in JSON:")
	schemas := map[string]string{
		"person": `{"type":"object","properties":{"name":{"type":"string","maxLength":12},"age":{"type":"integer","minimum":0,"maximum":150}},"required":["name","age"],"additionalProperties":false}`,
		"text":   `{"type":"object","properties":{"text":{"type":"string"}},"required":["text"],"additionalProperties":false}`,
	}
	for _, name := range []string{"person", "text"} {
		c := schemaConstraint(b, schemas[name])
		for _, temp := range []float32{0, 1} {
			for _, order := range []string{"grammar-first", "sample-first"} {
				b.Run(name+"/temp"+strconv.Itoa(int(temp))+"/"+order, func(b *testing.B) {
					seed := int64(1)
					samp := Sampling{Temperature: temp, Seed: &seed}
					d, err := newLlamaDecoder(m, Options{Slots: 1, Threads: 1, BatchThreads: 2}, 512, 1024)
					if err != nil {
						b.Fatal(err)
					}
					defer d.close()
					d.maskFirst = order == "grammar-first"
					timedRun(b, d, prompt, c, samp, 1) // the first use reads the vocabulary
					var spent time.Duration
					tokens := 0
					b.ResetTimer()
					for range b.N {
						n, took := timedRun(b, d, prompt, c, samp, 64)
						tokens += n
						spent += took
					}
					b.ReportMetric(float64(spent.Nanoseconds())/float64(tokens), "sample-ns/token")
				})
			}
		}
	}
}

// timedRun is constrainedRun on d's sequence 0 that returns how many
// tokens it sampled and the time the draws took.
func timedRun(b *testing.B, d *llamaDecoder, prompt []int32, c constraint, samp Sampling, max int) (int, time.Duration) {
	b.Helper()
	if !d.seqRemove(0, -1) {
		b.Fatal("cannot clear the sequence")
	}
	d.startSeq(0, samp, c)
	defer d.endSeq(0)
	var batch []batchToken
	for i, tok := range prompt {
		batch = append(batch, batchToken{tok: yz.Token(tok), pos: i, logits: i == len(prompt)-1})
	}
	if err := d.decode(batch); err != nil {
		b.Fatal(err)
	}
	var spent time.Duration
	n := 0
	pos, logit := len(prompt), int32(len(prompt)-1)
	for range max {
		start := time.Now()
		tok := d.sample(0, logit)
		spent += time.Since(start)
		n++
		if d.isEOG(tok) {
			break
		}
		if err := d.decode([]batchToken{{tok: tok, pos: pos, logits: true}}); err != nil {
			b.Fatal(err)
		}
		pos, logit = pos+1, 0
	}
	return n, spent
}

// TestAllowedMaskMatchesGrammar: the prefix forest's verdict on every
// token equals the grammar's own, asked token by token, at each step of a
// walk through a JSON schema's grammar and inside a character split
// across tokens, for Qwen 2.5's byte-level BPE vocabulary of 151k tokens
// and Mistral's SentencePiece one (byte tokens, ▁ for spaces).
func TestAllowedMaskMatchesGrammar(t *testing.T) {
	for _, tc := range []struct{ vocab, template string }{
		{"qwen2", "Qwen-Qwen2.5-7B-Instruct"},
		{"llama-spm", "mistralai-Mistral-Nemo-Instruct-2407"},
	} {
		t.Run(tc.vocab, func(t *testing.T) { testAllowedMask(t, tc.vocab, tc.template) })
	}
}

func testAllowedMask(t *testing.T, vocab, template string) {
	m := openPath(t, testenv.LlamaChatModel(t, vocab, template), Options{ContextSize: 1024})
	const schema = `{"type":"object","properties":{"name":{"type":"string","maxLength":12},"age":{"type":"integer","minimum":0,"maximum":150}},"required":["name","age"],"additionalProperties":false}`
	c := schemaConstraint(t, schema)
	d, err := newLlamaDecoder(m, Options{Slots: 1, Threads: 1, BatchThreads: 2}, 512, 1024)
	if err != nil {
		t.Fatal(err)
	}
	defer d.close()
	g := c.sampler(m.vocab)
	defer yz.SamplerFree(g)
	direct := func() []bool {
		all := make([]yz.TokenData, m.nVocab)
		for id := range all {
			all[id] = yz.TokenData{Id: yz.Token(id)}
		}
		arr := yz.TokenDataArray{Data: &all[0], Size: uint64(len(all)), Selected: -1}
		yz.SamplerApply(g, &arr)
		out := make([]bool, len(all))
		for _, td := range all {
			out[td.Id] = !math.IsInf(float64(td.Logit), -1)
		}
		return out
	}
	check := func(at string) {
		t.Helper()
		want := direct()
		got := d.allowedMask(g)
		n := 0
		for id := range want {
			if got[id] != want[id] {
				t.Fatalf("after %q: token %d (%q): forest %v, grammar %v", at, id, m.piece(yz.Token(id), true), got[id], want[id])
			}
			if want[id] {
				n++
			}
		}
		t.Logf("after %q: %d tokens allowed", at, n)
	}
	// A walk that takes the allowed token of lowest id at each step (not
	// whitespace), then a split character: the lead byte of "é" alone, where
	// the vocabulary has it.
	out := ""
	for step := 0; step < 14; step++ {
		check(out)
		allowed := d.allowedMask(g)
		next := slices.Index(allowed, true)
		for id := range allowed { // past the whitespace the grammar allows
			if allowed[id] && strings.TrimSpace(m.piece(yz.Token(id), true)) != "" {
				next = id
				break
			}
		}
		if step == 10 {
			for id := range allowed {
				if allowed[id] && m.piece(yz.Token(id), true) == "\xc3" {
					next = id
				}
			}
		}
		if next < 0 || d.isEOG(yz.Token(next)) {
			break
		}
		yz.SamplerAccept(g, yz.Token(next))
		out += m.piece(yz.Token(next), true)
	}
	if !strings.HasPrefix(out, "{") {
		t.Fatalf("walk %q", out)
	}
}
