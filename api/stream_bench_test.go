package api

import (
	"bufio"
	"bytes"
	"context"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strings"
	"sync"
	"testing"

	"github.com/modeld/modeld/backends"
)

// streamModel streams n one-token events as fast as they are read: the cost
// per token of everything modeld's daemon does after the backend produced a
// token (the chat core, the SSE encoding and write, the HTTP server).
type streamModel struct {
	backends.Model
	n int
}

func (m *streamModel) Info() backends.Info {
	return backends.Info{Backend: "bench-stream", Task: "chat", ContextSize: 1 << 16, Slots: 4, Device: "cpu"}
}
func (m *streamModel) Close() error { return nil }
func (m *streamModel) Generate(ctx context.Context, req backends.Request) (<-chan backends.Event, error) {
	out := make(chan backends.Event, 1)
	go func() {
		defer close(out)
		for i := range m.n {
			select {
			case out <- backends.Event{Token: int32(i), Text: " tok"}:
			case <-ctx.Done():
				return
			}
		}
		out <- backends.Event{Token: -1, Done: true, Finish: backends.FinishLength, Usage: backends.Usage{PromptTokens: 3, CompletionTokens: m.n}}
	}()
	return out, nil
}

var registerStreamBench = sync.OnceFunc(func() {
	backends.Register("bench-stream", func(_ context.Context, spec backends.LoadSpec) (backends.Model, error) {
		return &streamModel{n: 256}, nil
	})
})

// BenchmarkStreamPerToken is the daemon's own cost of one streamed token:
// a chat completion of 256 tokens streamed over a loopback HTTP connection
// by the real server and cache, read to its [DONE] by the client. It
// reports ns/token (wall, both sides on this machine), B/token and
// allocs/token (the server's and the client's together). The cost of the
// runner hop (backends/llama's BenchmarkRunnerEvents) and of the engine
// (backends/llama/engine) come on top.
func BenchmarkStreamPerToken(b *testing.B) {
	registerStreamBench()
	srv, _ := backendServer(b, "bench-stream")
	ts := httptest.NewServer(srv.Handler())
	defer ts.Close()
	body := []byte(`{"model":"b/stream","stream":true,"messages":[{"role":"user","content":"hi"}]}`)
	run := func() int {
		res, err := http.Post(ts.URL+"/v1/chat/completions", "application/json", bytes.NewReader(body))
		if err != nil {
			b.Fatal(err)
		}
		defer res.Body.Close()
		sc := bufio.NewScanner(res.Body)
		n := 0
		for sc.Scan() {
			line := sc.Text()
			if strings.Contains(line, `"content":" tok"`) {
				n++
			}
			if line == "data: [DONE]" {
				return n
			}
		}
		b.Fatalf("stream ended without [DONE] after %d tokens (status %d)", n, res.StatusCode)
		return 0
	}
	if n := run(); n != 256 {
		b.Fatalf("streamed %d tokens, want 256", n)
	}
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
