package llama

import (
	"context"
	"errors"
	"net/http"
	"reflect"
	"strings"
	"sync"
	"testing"

	"github.com/modeld/modeld/backends"
	"github.com/modeld/modeld/internal/ggufgen"
)

// routeCounter counts a Runner's calls by path.
type routeCounter struct {
	next http.RoundTripper
	mu   sync.Mutex
	n    map[string]int
}

func (c *routeCounter) RoundTrip(req *http.Request) (*http.Response, error) {
	c.mu.Lock()
	c.n[req.URL.Path]++
	c.mu.Unlock()
	return c.next.RoundTrip(req)
}

func (c *routeCounter) take() map[string]int {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := c.n
	c.n = map[string]int{}
	return n
}

// A raw prompt is tokenized in the runner's /generate, in one call: the
// events, the usage and the errors are those of the same request with the
// prompt's tokens, special-token text parsed as tokens.
func TestRunnerGeneratesFromText(t *testing.T) {
	initLib(t)
	path := genModel(t, ggufgen.Tiny(ggufgen.BPE))
	r := startRunner(t, path, Options{Slots: 1, ContextSize: 256})
	rc := &routeCounter{next: r.client.Transport, n: map[string]int{}}
	r.client.Transport = rc
	var _ backends.TextGenerator = r

	text := "<|im_start|>user\nHello world, the naïve café<|im_end|>\n<|im_start|>assistant\n"
	ids, err := r.Tokenize(text, true, true)
	if err != nil {
		t.Fatal(err)
	}
	rc.take()
	run := func(req Request) ([]Event, map[string]int) {
		t.Helper()
		ch, err := r.Generate(context.Background(), req)
		if err != nil {
			t.Fatal(err)
		}
		return collect(t, ch), rc.take()
	}
	// The prompt's tokens first, then the text: the second finds the same
	// cached prefix the first left, as the first found the one before it.
	run(Request{Prompt: ids, MaxTokens: 12})
	want, _ := run(Request{Prompt: ids, MaxTokens: 12})
	got, calls := run(Request{Text: text, MaxTokens: 12})
	if !reflect.DeepEqual(got, want) {
		t.Errorf("from the text\n got %+v\nwant %+v", got, want)
	}
	if u := got[len(got)-1].Usage; u.PromptTokens != len(ids) {
		t.Errorf("usage %+v, want %d prompt tokens", u, len(ids))
	}
	if !reflect.DeepEqual(calls, map[string]int{"/generate": 1}) {
		t.Errorf("calls %v, want one /generate", calls)
	}

	// Errors are the token path's: a text over the context is a context
	// overflow, one with a NUL byte an invalid request.
	long := strings.Repeat("Hello world ", 400)
	if _, err := r.Generate(context.Background(), Request{Text: long, MaxTokens: 4}); !errors.As(err, new(*backends.ContextOverflowError)) {
		t.Errorf("a text over the context: %v, want a context overflow", err)
	}
	if _, err := r.Generate(context.Background(), Request{Text: "a\x00b", MaxTokens: 4}); !errors.Is(err, ErrInvalidRequest) {
		t.Errorf("a text with a NUL byte: %v, want an invalid request", err)
	}
	// The runner still serves.
	if got, _ := run(Request{Text: text, MaxTokens: 12}); !reflect.DeepEqual(got, want) {
		t.Errorf("after the errors\n got %+v\nwant %+v", got, want)
	}
}
