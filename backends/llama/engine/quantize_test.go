package engine

import "testing"

func TestTensorProgress(t *testing.T) {
	d, n, ok := tensorProgress("[  12/  57]                  blk.1.attn_q.weight - [  256,   256,     1,     1], type =    f16, converting to q8_0 .. size =     0.12 MiB ->     0.07 MiB")
	if !ok || d != 12 || n != 57 {
		t.Errorf("tensor line read as %d/%d %v", d, n, ok)
	}
	for _, bad := range []string{"llama_model_quantize_impl: model size = 1.2 MiB", "[ 58/ 57] x", "[0/0] x", ""} {
		if _, _, ok := tensorProgress(bad); ok {
			t.Errorf("tensorProgress(%q) accepted", bad)
		}
	}
}
