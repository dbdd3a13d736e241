package api

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/modeld/modeld/cache"
)

// keep_alive is read by the configuration's own parser: what --keep-alive
// refuses, a request's keep_alive refuses too, with a 400 naming the field
// and before any model is loaded.
func TestKeepAliveRefusedOnEveryRoute(t *testing.T) {
	loads := 0
	resolve := func(_ context.Context, id string) (cache.Spec, error) {
		loads++
		return cache.Spec{}, context.Canceled
	}
	load := func(context.Context, cache.Spec) (cache.Instance, error) {
		loads++
		return nil, context.Canceled
	}
	c, err := cache.New(cache.DefaultConfig(), resolve, load)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close(context.Background()) })
	s := New(Options{Constraints: testConstraints, Version: "test", Libs: backendsLibs(t), Cache: c})
	bodies := map[string]string{
		"/v1/chat/completions": `{"model":"m","messages":[{"role":"user","content":"hi"}],"keep_alive":%s}`,
		"/v1/completions":      `{"model":"m","prompt":"hi","keep_alive":%s}`,
		"/v1/embeddings":       `{"model":"m","input":"x","keep_alive":%s}`,
		"/v1/classify":         `{"model":"m","input":"x","keep_alive":%s}`,
		"/v1/rerank":           `{"model":"m","query":"q","documents":["d"],"keep_alive":%s}`,
		"/v1/summarize":        `{"model":"m","input":"x","keep_alive":%s}`,
	}
	for _, bad := range []string{`"10 minutes"`, `"1e3"`, `1e3`, `""`, `"soon"`, `"5 m"`, `true`, `{}`, `["5m"]`, `"inf"`, `"99999999999"`} {
		for path, body := range bodies {
			w := post(t, s, path, strings.Replace(body, "%s", bad, 1))
			var e struct {
				Error struct {
					Message string  `json:"message"`
					Type    string  `json:"type"`
					Param   *string `json:"param"`
				} `json:"error"`
			}
			if err := json.Unmarshal(w.Body.Bytes(), &e); err != nil || w.Code != 400 ||
				e.Error.Param == nil || *e.Error.Param != "keep_alive" || e.Error.Type != "invalid_request_error" ||
				!strings.Contains(e.Error.Message, "keep_alive") {
				t.Errorf("%s keep_alive %s: %d %s; want a 400 with param keep_alive", path, bad, w.Code, w.Body)
			}
		}
	}
	if loads != 0 {
		t.Errorf("%d model loads for refused requests, want none", loads)
	}
}

// The forms --keep-alive accepts set the loaded model's keep-alive.
func TestKeepAliveForms(t *testing.T) {
	for raw, want := range map[string]time.Duration{
		`"5m"`: 5 * time.Minute, `"300"`: 300 * time.Second, `300`: 300 * time.Second,
		`"-1"`: -time.Second, `-1`: -time.Second, `"0"`: 0, `0`: 0, `1.5`: 1500 * time.Millisecond, `"1h30m"`: 90 * time.Minute,
	} {
		ps := allFakes()
		resolve := func(_ context.Context, id string) (cache.Spec, error) {
			return cache.Spec{ID: id, Task: ps[id].Info().Task, Backend: "onnx"}, nil
		}
		load := func(_ context.Context, spec cache.Spec) (cache.Instance, error) {
			return &fakeInstance{p: ps[spec.ID], device: "cpu"}, nil
		}
		cfg := cache.DefaultConfig()
		cfg.KeepAlive = -1 // so that 0 is not the cache's own default unloading at once
		c, err := cache.New(cfg, resolve, load)
		if err != nil {
			t.Fatal(err)
		}
		s := New(Options{Constraints: testConstraints, Version: "test", Libs: backendsLibs(t), Cache: c})
		w := pipePost(t, s, "/v1/embeddings", `{"model":"embed","input":"x","keep_alive":`+raw+`}`)
		if w.Code != 200 {
			t.Errorf("keep_alive %s: %d %s", raw, w.Code, w.Body)
		}
		if want != 0 { // 0 unloads the model as soon as the request ends
			snap := c.Snapshot()
			if len(snap.Models) != 1 || snap.Models[0].KeepAlive != want {
				t.Errorf("keep_alive %s: loaded %+v, want keep-alive %s", raw, snap.Models, want)
			}
		}
		_ = c.Close(context.Background())
	}
}
