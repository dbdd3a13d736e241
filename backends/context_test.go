package backends

import "testing"

func TestEffectiveContext(t *testing.T) {
	for _, c := range []struct{ trained, limit, want int }{
		{trained: 131072, limit: 8192, want: 8192}, // a long-context model gets the limit
		{trained: 2048, limit: 8192, want: 2048},   // a short one its own
		{trained: 8192, limit: 8192, want: 8192},
		{trained: 0, limit: 8192, want: 8192}, // trained context unknown
		{trained: -1, limit: 4096, want: 4096},
		{trained: 4096, limit: 0, want: 4096}, // no limit
		{trained: 0, limit: 0, want: 0},
	} {
		if got := EffectiveContext(c.trained, c.limit); got != c.want {
			t.Errorf("EffectiveContext(%d, %d) = %d, want %d", c.trained, c.limit, got, c.want)
		}
	}
}
