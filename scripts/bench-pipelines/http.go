package main

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// httpParams say where and how to call /v1/embeddings.
type httpParams struct {
	url    string // base URL, e.g. http://127.0.0.1:8080
	name   string // model id
	format string // encoding_format: float or base64
}

// httpSide is modeld serve through /v1/embeddings, called as a client would:
// every vector decoded.
type httpSide struct {
	client *http.Client
	p      httpParams
	wl     workload
	// firstMs is the first request's latency: it loads the model.
	firstMs float64
	device  string
}

func newHTTPSide(ctx context.Context, p httpParams, wl workload) (*httpSide, error) {
	if p.format != "float" && p.format != "base64" {
		return nil, fmt.Errorf("http: encoding_format %q: want float or base64", p.format)
	}
	s := &httpSide{
		client: &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 2 * wl.concurrency}, Timeout: 5 * time.Minute},
		p:      p,
		wl:     wl,
	}
	t := time.Now()
	_, dev, err := embed(ctx, s.client, p, wl.texts[:1])
	if err != nil {
		return nil, err
	}
	s.firstMs = float64(time.Since(t).Microseconds()) / 1000
	s.device = dev
	if _, _, err := embed(ctx, s.client, p, wl.texts); err != nil { // warm-up
		return nil, err
	}
	return s, nil
}

func (s *httpSide) first(ctx context.Context) ([]float64, error) {
	v, _, err := embed(ctx, s.client, s.p, s.wl.texts[:1])
	if err != nil {
		return nil, err
	}
	return float64s(v[0]), nil
}

func (s *httpSide) batch(ctx context.Context) (float64, error) {
	t := time.Now()
	for i := range s.wl.calls {
		v, _, err := embed(ctx, s.client, s.p, s.wl.batchTexts(i))
		if err != nil {
			return 0, err
		}
		if len(v) != s.wl.batch {
			return 0, fmt.Errorf("http: %d embeddings, want %d", len(v), s.wl.batch)
		}
	}
	return rate(s.wl.calls*s.wl.batch, time.Since(t)), nil
}

func (s *httpSide) concurrent(ctx context.Context) (float64, error) {
	t := time.Now()
	err := concurrently(s.wl.concurrency, func(c int) error {
		for i := range s.wl.calls {
			if _, _, err := embed(ctx, s.client, s.p, []string{s.wl.singleText(c, i)}); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return 0, err
	}
	return rate(s.wl.calls*s.wl.concurrency, time.Since(t)), nil
}

// embed POSTs texts to /v1/embeddings and decodes every vector, as a client
// would; it returns the vectors and the X-Modeld-Device header.
func embed(ctx context.Context, client *http.Client, p httpParams, texts []string) ([][]float32, string, error) {
	body, err := json.Marshal(map[string]any{"model": p.name, "input": texts, "encoding_format": p.format})
	if err != nil {
		return nil, "", err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, p.url+"/v1/embeddings", bytes.NewReader(body))
	if err != nil {
		return nil, "", err
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := client.Do(req)
	if err != nil {
		return nil, "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, "", err
	}
	if resp.StatusCode != http.StatusOK {
		return nil, "", fmt.Errorf("POST /v1/embeddings: %s: %s", resp.Status, b)
	}
	vecs, err := decodeResponse(b, len(texts), p.format)
	if err != nil {
		return nil, "", fmt.Errorf("POST /v1/embeddings: %w", err)
	}
	return vecs, resp.Header.Get("X-Modeld-Device"), nil
}

// decodeResponse reads the n vectors of an embeddings response, by index. It
// scans modeld's response shape by hand ("index" before "embedding" in each
// item of "data"): encoding/json's validating scan of some 150 KB of numbers
// took longer than parsing them, and the client's cost is not what the
// benchmark measures.
func decodeResponse(b []byte, n int, format string) ([][]float32, error) {
	s := string(b) // one copy; the pieces below share it
	const dataKey, indexKey, embKey = `"data":[`, `"index":`, `"embedding":`
	at := strings.Index(s, dataKey)
	if at < 0 {
		return nil, fmt.Errorf("no data array in %.80q", s)
	}
	s = s[at+len(dataKey):]
	vecs := make([][]float32, n)
	for len(s) > 0 && s[0] != ']' {
		i := strings.Index(s, indexKey)
		e := strings.Index(s, embKey)
		if i < 0 || e < i {
			return nil, fmt.Errorf("data item without index before embedding: %.80q", s)
		}
		digits := s[i+len(indexKey):]
		digits = digits[:strings.IndexFunc(digits, func(r rune) bool { return r < '0' || r > '9' })]
		idx, err := strconv.Atoi(digits)
		if err != nil || idx >= n {
			return nil, fmt.Errorf("index %q out of range", digits)
		}
		s = s[e+len(embKey):]
		end := strings.IndexByte(s, ']')
		if format == "base64" {
			end = strings.IndexByte(s[1:], '"') + 1
		}
		if end <= 0 {
			return nil, fmt.Errorf("embedding %d is not closed", idx)
		}
		if vecs[idx], err = decodeEmbedding(s[:end+1], format); err != nil {
			return nil, fmt.Errorf("embedding %d: %w", idx, err)
		}
		s = strings.TrimLeft(s[end+1:], "} ,\n")
	}
	for i, v := range vecs {
		if v == nil {
			return nil, fmt.Errorf("no embedding for input %d", i)
		}
	}
	return vecs, nil
}

// decodeEmbedding reads a JSON array of numbers, or with base64 a JSON string
// of little-endian float32 values.
func decodeEmbedding(raw string, format string) ([]float32, error) {
	if format != "base64" {
		return parseFloats(raw)
	}
	if len(raw) < 2 || raw[0] != '"' || raw[len(raw)-1] != '"' {
		return nil, fmt.Errorf("base64 embedding is not a JSON string: %.40q", raw)
	}
	b, err := base64.StdEncoding.DecodeString(raw[1 : len(raw)-1])
	if err != nil {
		return nil, err
	}
	if len(b)%4 != 0 {
		return nil, fmt.Errorf("base64 embedding of %d bytes is not float32s", len(b))
	}
	v := make([]float32, len(b)/4)
	for i := range v {
		v[i] = math.Float32frombits(binary.LittleEndian.Uint32(b[4*i:]))
	}
	return v, nil
}

// parseFloats reads a JSON array of numbers as float32s.
func parseFloats(raw string) ([]float32, error) {
	s := strings.TrimSpace(raw)
	if len(s) < 2 || s[0] != '[' || s[len(s)-1] != ']' {
		return nil, fmt.Errorf("embedding is not a JSON array: %.40q", s)
	}
	s = strings.TrimSpace(s[1 : len(s)-1])
	if s == "" {
		return []float32{}, nil
	}
	v := make([]float32, 0, strings.Count(s, ",")+1)
	for {
		num, rest, more := strings.Cut(s, ",")
		x, err := strconv.ParseFloat(strings.TrimSpace(num), 32)
		if err != nil {
			return nil, fmt.Errorf("embedding value %d: %w", len(v), err)
		}
		v = append(v, float32(x))
		if !more {
			return v, nil
		}
		s = rest
	}
}
