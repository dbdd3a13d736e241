package engine

import (
	"context"
	"runtime"
	"testing"

	yz "github.com/hybridgroup/yzma/pkg/llama"
)

// BenchmarkSchedulerPerToken is the engine's own cost of one generated
// token outside llama.cpp: the scheduler's batch building, its bookkeeping,
// the token's text, stop and budget checks and the event to the stream,
// over a decoder that decodes and samples instantly (fakeDecoder). One
// request of 256 tokens per iteration; ns/token, B/token and allocs/token
// are reported.
func BenchmarkSchedulerPerToken(b *testing.B) {
	dec := newFakeDecoder()
	s := newSchedulerWith(dec, 1, 512, 1<<20, 4, Hooks{})
	go s.loop()
	defer s.stop()
	run := func() {
		prompt := []yz.Token{10, 11, 12, 13}
		r := &request{ctx: context.Background(), prompt: prompt, budget: 256, samp: Sampling{}, stream: newStream()}
		if err := s.submit(r); err != nil {
			b.Fatal(err)
		}
		go r.stream.pump()
		n := 0
		for ev := range r.stream.out {
			if ev.Done {
				break
			}
			n++
		}
		if n != 256 {
			b.Fatalf("%d tokens, want 256", n)
		}
	}
	run()
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	b.ResetTimer()
	for range b.N {
		run()
	}
	b.StopTimer()
	runtime.ReadMemStats(&after)
	tokens := float64(b.N * 256)
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/tokens, "ns/token")
	b.ReportMetric(float64(after.TotalAlloc-before.TotalAlloc)/tokens, "B/token")
	b.ReportMetric(float64(after.Mallocs-before.Mallocs)/tokens, "allocs/token")
}
