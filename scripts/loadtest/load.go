package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// kind is one sort of request the load sends, with the statuses it may get.
type kind struct {
	name     string
	endpoint string
	weight   int
	// expect are the statuses that are fine for this request; 503 with a
	// Retry-After is fine for every request that reaches a model.
	expect []int
	send   func(ctx context.Context, c *client) outcome
}

// outcome is what one request ended with.
type outcome struct {
	status    int  // HTTP status; 0 when the client gave up or the connection broke
	cancelled bool // the client abandoned it on purpose
	retry     bool // a 503 carried Retry-After
	// streamErr is an error event inside a 200 stream, or a stream cut
	// without [DONE].
	streamErr string
	err       error
	took      time.Duration
	ttft      time.Duration // streams: time to the first content chunk
}

type client struct {
	base, key string
	http      *http.Client
}

func newClient(base, key string) *client {
	tr := &http.Transport{MaxIdleConnsPerHost: 64}
	return &client{base: base, key: key, http: &http.Client{Transport: tr, Timeout: 2 * time.Minute}}
}

func (c *client) request(ctx context.Context, method, path, body string) (*http.Request, error) {
	req, err := http.NewRequestWithContext(ctx, method, c.base+path, strings.NewReader(body))
	if err != nil {
		return nil, err
	}
	req.Header.Set("Authorization", "Bearer "+c.key)
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	return req, nil
}

// plain sends a request and reads its whole answer.
func (c *client) plain(ctx context.Context, method, path, body string, edit func(*http.Request)) outcome {
	start := time.Now()
	req, err := c.request(ctx, method, path, body)
	if err != nil {
		return outcome{err: err}
	}
	if edit != nil {
		edit(req)
	}
	res, err := c.http.Do(req)
	if err != nil {
		return outcome{err: err, took: time.Since(start)}
	}
	defer res.Body.Close()
	_, err = io.Copy(io.Discard, res.Body)
	return outcome{status: res.StatusCode, retry: res.Header.Get("Retry-After") != "", err: err, took: time.Since(start)}
}

// stream sends a streaming chat request and reads its events; with
// abandonAfter > 0 it cancels the request after that many content chunks.
func (c *client) stream(ctx context.Context, body string, abandonAfter int) outcome {
	start := time.Now()
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	req, err := c.request(ctx, http.MethodPost, "/v1/chat/completions", body)
	if err != nil {
		return outcome{err: err}
	}
	res, err := c.http.Do(req)
	if err != nil {
		return outcome{err: err, took: time.Since(start)}
	}
	defer res.Body.Close()
	o := outcome{status: res.StatusCode, retry: res.Header.Get("Retry-After") != ""}
	if res.StatusCode != http.StatusOK {
		_, _ = io.Copy(io.Discard, res.Body)
		o.took = time.Since(start)
		return o
	}
	sc := bufio.NewScanner(res.Body)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	chunks, done := 0, false
	for sc.Scan() {
		line := sc.Text()
		data, ok := strings.CutPrefix(line, "data: ")
		if !ok {
			continue
		}
		if data == "[DONE]" {
			done = true
			break
		}
		if strings.HasPrefix(data, `{"error"`) {
			o.streamErr = data
			break
		}
		chunks++
		if chunks == 1 {
			o.ttft = time.Since(start)
		}
		if abandonAfter > 0 && chunks >= abandonAfter {
			cancel()
			o.cancelled = true
			o.took = time.Since(start)
			return o
		}
	}
	o.took = time.Since(start)
	if o.streamErr == "" && !done {
		o.streamErr = "stream ended without [DONE]"
		if err := sc.Err(); err != nil {
			o.streamErr += ": " + err.Error()
		}
	}
	return o
}

func chatBody(stream bool, maxTokens int) string {
	return fmt.Sprintf(`{"model":"load/chat","stream":%t,"max_tokens":%d,"temperature":0.8,`+
		`"messages":[{"role":"system","content":"You are terse."},{"role":"user","content":"Tell me about rivers, number %d."}]}`,
		stream, maxTokens, rand.IntN(1000))
}

var kinds = []kind{
	{name: "chat stream", endpoint: "POST /v1/chat/completions", weight: 6, expect: []int{200, 503},
		send: func(ctx context.Context, c *client) outcome { return c.stream(ctx, chatBody(true, 48), 0) }},
	{name: "chat stream, client leaves", endpoint: "POST /v1/chat/completions", weight: 3, expect: []int{200, 503},
		send: func(ctx context.Context, c *client) outcome { return c.stream(ctx, chatBody(true, 400), 3) }},
	{name: "chat", endpoint: "POST /v1/chat/completions", weight: 3, expect: []int{200, 503},
		send: func(ctx context.Context, c *client) outcome {
			return c.plain(ctx, http.MethodPost, "/v1/chat/completions", chatBody(false, 16), nil)
		}},
	{name: "embeddings", endpoint: "POST /v1/embeddings", weight: 8, expect: []int{200, 503},
		send: func(ctx context.Context, c *client) outcome {
			return c.plain(ctx, http.MethodPost, "/v1/embeddings",
				`{"model":"load/embed","input":["the river runs","to the sea","a third text","and a fourth one, longer than the others"]}`, nil)
		}},
	{name: "classify", endpoint: "POST /v1/classify", weight: 6, expect: []int{200, 503},
		send: func(ctx context.Context, c *client) outcome {
			return c.plain(ctx, http.MethodPost, "/v1/classify", `{"model":"load/classify","input":["what a fine day","this is awful"]}`, nil)
		}},
	{name: "bad JSON", endpoint: "POST /v1/chat/completions", weight: 2, expect: []int{400},
		send: func(ctx context.Context, c *client) outcome {
			return c.plain(ctx, http.MethodPost, "/v1/chat/completions", `{"model":"load/chat","messages":[{"role":`, nil)
		}},
	{name: "unknown model", endpoint: "POST /v1/embeddings", weight: 2, expect: []int{404},
		send: func(ctx context.Context, c *client) outcome {
			return c.plain(ctx, http.MethodPost, "/v1/embeddings", `{"model":"load/absent","input":"x"}`, nil)
		}},
	{name: "wrong model kind", endpoint: "POST /v1/embeddings", weight: 1, expect: []int{400},
		send: func(ctx context.Context, c *client) outcome {
			return c.plain(ctx, http.MethodPost, "/v1/embeddings", `{"model":"load/chat","input":"x"}`, nil)
		}},
	{name: "no API key", endpoint: "GET /v1/models", weight: 1, expect: []int{401},
		send: func(ctx context.Context, c *client) outcome {
			return c.plain(ctx, http.MethodGet, "/v1/models", "", func(r *http.Request) { r.Header.Del("Authorization") })
		}},
	{name: "foreign Host", endpoint: "POST /v1/chat/completions", weight: 1, expect: []int{403},
		send: func(ctx context.Context, c *client) outcome {
			return c.plain(ctx, http.MethodPost, "/v1/chat/completions", chatBody(false, 4), func(r *http.Request) { r.Host = "evil.example" })
		}},
	{name: "cross-site text/plain", endpoint: "POST /v1/chat/completions", weight: 1, expect: []int{403, 415},
		send: func(ctx context.Context, c *client) outcome {
			return c.plain(ctx, http.MethodPost, "/v1/chat/completions", chatBody(false, 4), func(r *http.Request) {
				r.Header.Set("Origin", "https://evil.example")
				r.Header.Set("Content-Type", "text/plain")
			})
		}},
}

// result gathers the outcomes of the load, per kind.
type result struct {
	mu      sync.Mutex
	byKind  map[string][]outcome
	elapsed time.Duration
	sent    int
	workers int
}

func (r *result) add(k string, o outcome) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.byKind[k] = append(r.byKind[k], o)
}

// load runs workers that pick request kinds by weight until n requests were
// sent or d has passed. With more workers than a model's slots plus its queue,
// requests to a busy model go above the queue limit and get 503s.
func (c *client) load(n int, d time.Duration, workers int) *result {
	res := &result{byKind: map[string][]outcome{}, workers: workers}
	total := 0
	for _, k := range kinds {
		total += k.weight
	}
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	var sent atomic.Int64
	var wg sync.WaitGroup
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for ctx.Err() == nil && sent.Add(1) <= int64(n) {
				pick := rand.IntN(total)
				k := kinds[0]
				for _, kk := range kinds {
					if pick < kk.weight {
						k = kk
						break
					}
					pick -= kk.weight
				}
				o := k.send(ctx, c)
				if ctx.Err() != nil && o.status == 0 {
					return // the load's own deadline, not an outcome
				}
				res.add(k.name, o)
				if o.status == http.StatusServiceUnavailable {
					// A client backs off when told to; 10-30 ms instead of
					// the Retry-After seconds keeps the pressure on.
					time.Sleep(time.Duration(10+rand.IntN(20)) * time.Millisecond)
				}
			}
		}()
	}
	wg.Wait()
	res.sent = min(int(sent.Load()), n)
	return res
}

// warmUp loads the three models once.
func (c *client) warmUp() error {
	ctx := context.Background()
	for _, w := range []struct{ path, body string }{
		{"/v1/chat/completions", chatBody(false, 4)},
		{"/v1/embeddings", `{"model":"load/embed","input":"warm"}`},
		{"/v1/classify", `{"model":"load/classify","input":"warm"}`},
	} {
		if o := c.plain(ctx, http.MethodPost, w.path, w.body, nil); o.status != 200 {
			return fmt.Errorf("%s: status %d %v", w.path, o.status, o.err)
		}
	}
	return nil
}

// vitals are the daemon's own figures from /metrics.
type vitals struct {
	goroutines int
	rss        int64
	runnersRSS int64
}

var metricLine = regexp.MustCompile(`(?m)^(go_goroutines|process_resident_memory_bytes) ([0-9.e+]+)$`)

func (c *client) vitals() (vitals, error) {
	req, err := c.request(context.Background(), http.MethodGet, "/metrics", "")
	if err != nil {
		return vitals{}, err
	}
	res, err := c.http.Do(req)
	if err != nil {
		return vitals{}, err
	}
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	if err != nil {
		return vitals{}, err
	}
	if res.StatusCode != 200 {
		return vitals{}, fmt.Errorf("/metrics: status %d", res.StatusCode)
	}
	var v vitals
	found := 0
	for _, m := range metricLine.FindAllSubmatch(b, -1) {
		f, err := strconv.ParseFloat(string(m[2]), 64)
		if err != nil {
			continue
		}
		found++
		switch string(m[1]) {
		case "go_goroutines":
			v.goroutines = int(f)
		case "process_resident_memory_bytes":
			v.rss = int64(f)
		}
	}
	if found < 2 {
		return v, errors.New("/metrics has no go_goroutines or process_resident_memory_bytes")
	}
	return v, nil
}

// goroutineSlack is how many goroutines above the level before the load still
// count as "back": idle HTTP connections of the load's own client.
const goroutineSlack = 4

// settle waits (at most 20 s) until the daemon's goroutines are back to their
// level before the load, first closing the client's idle connections.
func (c *client) settle(before vitals) (vitals, bool) {
	c.http.CloseIdleConnections()
	deadline := time.Now().Add(20 * time.Second)
	var v vitals
	for {
		var err error
		v, err = c.vitals()
		c.http.CloseIdleConnections()
		if err == nil && v.goroutines <= before.goroutines+goroutineSlack {
			return v, true
		}
		if time.Now().After(deadline) {
			return v, false
		}
		time.Sleep(250 * time.Millisecond)
	}
}
