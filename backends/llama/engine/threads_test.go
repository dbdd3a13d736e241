package engine

import (
	"testing"

	yz "github.com/hybridgroup/yzma/pkg/llama"

	"github.com/modeld/modeld/internal/ggufgen"
)

// TestDecoderThreadpools: a decoder over the prebuilt CPU backend gets
// thread pools of its own (one when decode and batch threads agree, two when
// they differ) that its steps run on, and greedy output is the same as on a
// context without them (llama.cpp's per-step threads).
func TestDecoderThreadpools(t *testing.T) {
	m := openModel(t, ggufgen.Tiny(ggufgen.SPM), Options{Slots: 1, Threads: 2})
	prompt := tokenize(t, m, "Hello world, tell me a story")
	run := func(threads, batchThreads int, pools bool) ([]yz.Token, int) {
		d, err := newLlamaDecoder(m, Options{Slots: 1, Threads: threads, BatchThreads: batchThreads}, 512, 512)
		if err != nil {
			t.Fatal(err)
		}
		defer d.close()
		n := len(d.pools)
		if !pools {
			yz.DetachThreadpool(d.lctx)
			freeThreadpools(d.pools)
			d.pools = nil
		}
		d.startSeq(0, Sampling{}, constraint{})
		var batch []batchToken
		for i, tok := range prompt {
			batch = append(batch, batchToken{tok: yz.Token(tok), pos: i, logits: i == len(prompt)-1})
		}
		var out []yz.Token
		for pos := len(prompt); len(out) < 12; pos++ {
			if err := d.decode(batch); err != nil {
				t.Fatal(err)
			}
			tok := d.sample(0, int32(len(batch)-1))
			out = append(out, tok)
			batch = []batchToken{{tok: tok, pos: pos, logits: true}}
		}
		return out, n
	}
	plain, _ := run(2, 2, false)
	same, n1 := run(2, 2, true)
	split, n2 := run(1, 2, true)
	if n1 != 1 || n2 != 2 {
		t.Fatalf("pools: %d for 2/2 threads, %d for 1/2; want 1 and 2", n1, n2)
	}
	for name, got := range map[string][]yz.Token{"one pool": same, "two pools": split} {
		if len(got) != len(plain) {
			t.Fatalf("%s: %d tokens, want %d", name, len(got), len(plain))
		}
		for i := range got {
			if got[i] != plain[i] {
				t.Fatalf("%s: greedy tokens %v, without pools %v", name, got, plain)
			}
		}
	}
}
