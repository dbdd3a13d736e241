package api

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"math"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/modeld/modeld/api/core"
	"github.com/modeld/modeld/api/openai"
	"github.com/modeld/modeld/backends"
)

// fakeEmbed returns, for text i, the vector [i+1, i+2, ...] of length dim (or
// Dimensions), and records the options it got.
type fakeEmbed struct {
	fakeBase
	dim       int
	err       error
	truncated int

	gotTexts []string
	gotOpts  backends.EmbedOptions
}

func (f *fakeEmbed) Dimensions() int { return f.dim }

func (f *fakeEmbed) Embed(_ context.Context, texts []string, opts backends.EmbedOptions) (backends.EmbedResult, error) {
	f.gotTexts, f.gotOpts = texts, opts
	if f.err != nil {
		return backends.EmbedResult{}, f.err
	}
	n := f.dim
	if opts.Dimensions > 0 {
		n = opts.Dimensions
	}
	res := backends.EmbedResult{Tokens: 3 * len(texts), Truncated: f.truncated, Device: "cpu"}
	for i := range texts {
		v := make([]float32, n)
		for j := range v {
			v[j] = float32(i + j + 1)
		}
		if i == 0 && len(texts) == 1 && texts[0] == "nan" {
			v[0] = float32(math.NaN())
		}
		res.Vectors = append(res.Vectors, v)
	}
	return res, nil
}

func TestEmbeddingsOpenAIShape(t *testing.T) {
	e := &fakeEmbed{fakeBase: fakeBase{backends.TaskEmbed}, dim: 3, truncated: 1}
	s, _ := pipelineServer(t, map[string]backends.Model{"m": e})
	w := pipePost(t, s, "/v1/embeddings", `{"model":"m","input":["a","b"],"user":"u1"}`)
	var got openai.EmbeddingList
	decodeBody(t, w, &got)
	if got.Object != "list" || got.Model != "m" || len(got.Data) != 2 || got.Usage != (core.TaskUsage{PromptTokens: 6, TotalTokens: 6}) {
		t.Fatalf("response = %+v", got)
	}
	for i, d := range got.Data {
		want := []any{float64(i + 1), float64(i + 2), float64(i + 3)}
		if d.Object != "embedding" || d.Index != i || !slices.Equal(d.Embedding.([]any), want) {
			t.Errorf("data[%d] = %+v", i, d)
		}
	}
	if w.Header().Get(core.TruncatedHeader) != "1" || w.Header().Get(core.DeviceHeader) != "cpu" {
		t.Errorf("headers = %v", w.Header())
	}
	// OpenAI's vectors are unit length: normalize is on unless asked otherwise.
	if e.gotOpts.Normalize == nil || !*e.gotOpts.Normalize || e.gotOpts.Pooling != "" || e.gotOpts.Dimensions != 0 {
		t.Errorf("default options = %+v", e.gotOpts)
	}
	if !slices.Equal(e.gotTexts, []string{"a", "b"}) {
		t.Errorf("texts = %q", e.gotTexts)
	}
}

func TestEmbeddingsOptions(t *testing.T) {
	e := &fakeEmbed{fakeBase: fakeBase{backends.TaskEmbed}, dim: 4}
	s, _ := pipelineServer(t, map[string]backends.Model{"m": e})
	w := pipePost(t, s, "/v1/embeddings", `{"model":"m","input":"a","pooling":"cls","normalize":false,"dimensions":2,"encoding_format":"float"}`)
	var got openai.EmbeddingList
	decodeBody(t, w, &got)
	if e.gotOpts.Pooling != backends.PoolingCLS || *e.gotOpts.Normalize || e.gotOpts.Dimensions != 2 {
		t.Errorf("options = %+v", e.gotOpts)
	}
	if len(got.Data[0].Embedding.([]any)) != 2 {
		t.Errorf("embedding = %v", got.Data[0].Embedding)
	}
	pipePost(t, s, "/v1/embeddings", `{"model":"m","input":"a","pooling":"last_token"}`)
	if e.gotOpts.Pooling != backends.PoolingLastToken {
		t.Errorf("pooling = %q", e.gotOpts.Pooling)
	}
}

func TestEmbeddingsBase64(t *testing.T) {
	e := &fakeEmbed{fakeBase: fakeBase{backends.TaskEmbed}, dim: 3}
	s, _ := pipelineServer(t, map[string]backends.Model{"m": e})
	var got struct {
		Data []struct {
			Embedding string `json:"embedding"`
		} `json:"data"`
	}
	decodeBody(t, pipePost(t, s, "/v1/embeddings", `{"model":"m","input":["a","b"],"encoding_format":"base64"}`), &got)
	for i, d := range got.Data {
		b, err := base64.StdEncoding.DecodeString(d.Embedding)
		if err != nil || len(b) != 12 {
			t.Fatalf("data[%d] = %q (%v)", i, d.Embedding, err)
		}
		for j := range 3 {
			if x := math.Float32frombits(binary.LittleEndian.Uint32(b[4*j:])); x != float32(i+j+1) {
				t.Errorf("data[%d][%d] = %v, want %d", i, j, x, i+j+1)
			}
		}
	}
}

func TestEmbeddingsValidation(t *testing.T) {
	e := &fakeEmbed{fakeBase: fakeBase{backends.TaskEmbed}, dim: 4}
	s, _ := pipelineServer(t, map[string]backends.Model{"m": e})
	cases := []struct {
		body, param, msg string
	}{
		{`{"model":"m","input":""}`, "input", "empty string"},
		{`{"model":"m","input":[]}`, "input", "empty array"},
		{`{"model":"m"}`, "input", "input is required"},
		{`{"model":"m","input":[[1,2,3]]}`, "input", "token ids"},
		{`{"model":"m","input":"a","encoding_format":"int8"}`, "encoding_format", "not one of float, base64"},
		{`{"model":"m","input":"a","dimensions":0}`, "dimensions", "at least 1"},
		{`{"model":"m","input":"a","dimensions":5}`, "dimensions", "exceeds the 4 dimensions"},
		{`{"model":"m","input":"a","pooling":"max"}`, "pooling", "not one of mean, cls, last_token"},
		{`{"model":"m","input":"a","dimensions":"x"}`, "dimensions", "invalid value"},
	}
	for _, c := range cases {
		e.gotTexts = nil
		wantError(t, pipePost(t, s, "/v1/embeddings", c.body), 400, c.param, c.msg)
		if e.gotTexts != nil {
			t.Errorf("%s reached the model", c.body)
		}
	}
	// Several problems are reported together.
	wantError(t, pipePost(t, s, "/v1/embeddings", `{"model":"m","input":"","encoding_format":"x"}`), 400, "input", "empty string", "encoding_format")
	// A model that produces NaN is a server error, not invalid JSON.
	wantError(t, pipePost(t, s, "/v1/embeddings", `{"model":"m","input":"nan"}`), 500, "", "non-finite")
}

// The hand-written response is byte for byte what encoding/json makes of an
// EmbeddingList, for both formats and floats of every magnitude.
func TestAppendEmbeddingsMatchesEncodingJSON(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	vals := []float32{0, float32(math.Copysign(0, -1)), 1, -1, 1e-6, 9.99e-7, -3.5e-9, 1e21, 9.9e20, -2.5e30,
		math.MaxFloat32, math.SmallestNonzeroFloat32, 0.1, 1.0 / 3}
	for range 2000 {
		vals = append(vals, float32(rng.NormFloat64()*math.Pow(10, float64(rng.IntN(60)-30))))
	}
	vecs := [][]float32{vals, vals[:3], {}}
	for _, b64 := range []bool{false, true} {
		want := openai.EmbeddingList{Object: "list", Model: `org/model "q"<&>`, Usage: core.TaskUsage{PromptTokens: 7, TotalTokens: 7}}
		for i, v := range vecs {
			e := openai.Embedding{Object: "embedding", Index: i, Embedding: v}
			if b64 {
				e.Embedding = base64.StdEncoding.EncodeToString(openai.FloatBytes(v))
			}
			want.Data = append(want.Data, e)
		}
		wantJSON, err := json.Marshal(want)
		if err != nil {
			t.Fatal(err)
		}
		got, ok := openai.AppendEmbeddings(new([]byte), want.Model, vecs, b64, want.Usage)
		if !ok {
			t.Fatalf("base64=%v: finite values refused", b64)
		}
		if !bytes.Equal(*got, wantJSON) {
			t.Errorf("base64=%v:\n got %.300s\nwant %.300s", b64, *got, wantJSON)
		}
	}
	for _, bad := range []float32{float32(math.NaN()), float32(math.Inf(1)), float32(math.Inf(-1))} {
		if _, ok := openai.AppendEmbeddings(new([]byte), "m", [][]float32{{1, bad}}, false, core.TaskUsage{}); ok {
			t.Errorf("%v accepted", bad)
		}
	}
}
