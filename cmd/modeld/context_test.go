package main

import (
	"context"
	"encoding/json"
	"net/http/httptest"
	"testing"

	"github.com/modeld/modeld/api"
	"github.com/modeld/modeld/api/core"
	"github.com/modeld/modeld/api/store"
	"github.com/modeld/modeld/backends"
	"github.com/modeld/modeld/probe"
)

// The context a chat model is placed and loaded with is the one the model
// list shows: both come from backends.EffectiveContext. The tiny model's
// trained context is 2048.
func TestEffectiveContextAgrees(t *testing.T) {
	noGPU := probe.Decide(probe.Readings{GOOS: "linux", Memory: probe.MemoryInfo{TotalBytes: 16 << 30}})
	for limit, want := range map[int]int{1024: 1024, 2048: 2048, 8192: 2048} {
		rt := testRuntime(t, noGPU, Config{ContextSize: limit, ChatSlots: 1})
		spec, err := rt.resolve(context.Background(), "t/chat")
		if err != nil {
			t.Fatal(err)
		}
		plan := spec.Data.(*loadPlan)
		srv := api.New(api.Options{Version: "test", Libs: backends.Libs{Root: t.TempDir()}, ContextCap: limit})
		srv.RegisterModels(core.ModelsOptions{Store: rt.store})
		w := httptest.NewRecorder()
		srv.Handler().ServeHTTP(w, httptest.NewRequest("GET", "http://localhost/v1/models/t/chat", nil))
		var m store.ModelObject
		if err := json.Unmarshal(w.Body.Bytes(), &m); err != nil || w.Code != 200 {
			t.Fatalf("GET /v1/models/t/chat: %d %s", w.Code, w.Body)
		}
		if plan.contextSize != want || int(m.ContextLength) != want || m.TrainedContext != 2048 {
			t.Errorf("--context-size %d: placed with %d, listed with %d (trained %d); want %d",
				limit, plan.contextSize, m.ContextLength, m.TrainedContext, want)
		}
	}
}
