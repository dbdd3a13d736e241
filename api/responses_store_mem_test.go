package api

import (
	"encoding/json"
	"fmt"
	"github.com/modeld/modeld/api/core"
	"github.com/modeld/modeld/api/responses"
	"runtime"
	"strings"
	"testing"
)

// fillStore stores responses planned from real Responses requests (input
// items decoded as the route decodes them, an output text) until the store
// has dropped some, and returns the heap the store holds after a GC: the
// growth of the heap's spans in use (HeapInuse), which counts the
// allocator's rounding and fragmentation besides the live bytes.
func fillStore(t *testing.T, s *responses.ResponseStore, text int) uint64 {
	t.Helper()
	var ms runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&ms)
	before := ms.HeapInuse
	limit := s.Cfg.MaxBytes
	for i := 0; ; i++ {
		body := fmt.Sprintf(`{"model":"m","input":[{"role":"user","content":[{"type":"input_text","text":%q}]},{"role":"assistant","content":%q},{"role":"user","content":%q}]}`,
			strings.Repeat(fmt.Sprint(i%10), text), strings.Repeat("a", text/2), strings.Repeat("u", text/4))
		var req responses.ResponsesRequest
		if err := json.Unmarshal([]byte(body), &req); err != nil {
			t.Fatal(err)
		}
		plan, err := req.Plan(nil, core.PlanEnv{ContextCap: 1 << 20, Constraints: testConstraints})
		if err != nil {
			t.Fatal(err)
		}
		r := &responses.Response{ID: fmt.Sprintf("resp_%d", i), Object: "response", Model: "m",
			Output: []any{responses.MessageItem{Type: "message", ID: fmt.Sprint("msg_", i), Role: "assistant", Content: []responses.OutputText{{Type: "output_text", Text: strings.Repeat("o", text/2)}}}}}
		s.Put(r, plan)
		if _, b := s.Len(); i > 50 && b > limit*9/10 {
			if n, _ := s.Len(); n < i {
				break
			}
		}
	}
	runtime.GC()
	runtime.GC() // and the pools' victim caches
	runtime.ReadMemStats(&ms)
	runtime.KeepAlive(s)
	if ms.HeapInuse < before {
		return 0
	}
	return ms.HeapInuse - before
}

// TestResponseStoreMemoryWithinItsSetting: a full store holds no more heap
// than about its MaxBytes setting (1.2×, for the allocator's rounding),
// whether its responses are small or large: what it counts is what it
// holds. Before, it held about 3.5× its setting.
func TestResponseStoreMemoryWithinItsSetting(t *testing.T) {
	for _, tc := range []struct{ text, setting int64 }{{200, 4 << 20}, {4 << 10, 8 << 20}, {256 << 10, 8 << 20}} {
		text := int(tc.text)
		s := responses.NewResponseStore(responses.ResponseStoreConfig{MaxEntries: 1 << 20, MaxBytes: tc.setting})
		held := fillStore(t, s, text)
		n, b := s.Len()
		t.Logf("text %d: %d responses, %d bytes counted, %d bytes of heap held (%.2f× the setting)", text, n, b, held, float64(held)/float64(s.Cfg.MaxBytes))
		if float64(held) > 1.2*float64(s.Cfg.MaxBytes) {
			t.Errorf("text %d: the store holds %d bytes of heap, more than 1.2× its %d", text, held, s.Cfg.MaxBytes)
		}
	}
}

// TestResponsesMetadataBounds: metadata is stored with the response, so
// it has OpenAI's bounds — 16 pairs, keys of 64 characters, values of 512 —
// and a request over one is a 400 on metadata naming the key, with nothing
// generated or stored; at the bounds it is kept and returned. Before, a
// value of any length was stored.
func TestResponsesMetadataBounds(t *testing.T) {
	s, m := respServer(t, echoReply, responses.ResponseStoreConfig{})
	atBounds := map[string]string{}
	for i := range responses.MaxMetadataPairs - 1 {
		atBounds[fmt.Sprintf("k%d", i)] = strings.Repeat("v", responses.MaxMetadataValue)
	}
	atBounds[strings.Repeat("é", responses.MaxMetadataKey)] = strings.Repeat("ü", responses.MaxMetadataValue)
	w := post(t, s, "/v1/responses", jsonOf(map[string]any{"model": "m", "input": "hi", "metadata": atBounds}))
	if w.Code != 200 {
		t.Fatalf("at the bounds: %d %s", w.Code, core.Clip(w.Body.String()))
	}
	if got := decodeObject(t, w)["metadata"].(map[string]any); len(got) != responses.MaxMetadataPairs {
		t.Errorf("metadata came back with %d pairs", len(got))
	}
	m.mu.Lock()
	calls := len(m.reqs)
	m.mu.Unlock()
	tooMany := map[string]string{}
	for i := range responses.MaxMetadataPairs + 1 {
		tooMany[fmt.Sprintf("k%d", i)] = "v"
	}
	for _, tc := range []struct {
		md   map[string]string
		want string
	}{
		{map[string]string{"user": strings.Repeat("x", 1<<20)}, `metadata["user"] has 1048576 characters, more than the 512 allowed`},
		{map[string]string{strings.Repeat("k", responses.MaxMetadataKey+1): "v"}, "has 65 characters, more than the 64 allowed"},
		{tooMany, "17 keys, more than the 16 allowed"},
	} {
		w := post(t, s, "/v1/responses", jsonOf(map[string]any{"model": "m", "input": "hi", "metadata": tc.md}))
		wantError(t, w, 400, "metadata", tc.want)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if n := len(m.reqs); n != calls {
		t.Errorf("%d generations for refused metadata", n-calls)
	}
}
