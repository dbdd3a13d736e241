package api

import (
	"encoding/json"
	"fmt"
	"reflect"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/modeld/modeld/api/responses"
	"github.com/modeld/modeld/backends"
)

func storedOne(s *responses.ResponseStore, id, text string) {
	s.Put(&responses.Response{ID: id, Object: "response", Output: []any{responses.MessageItem{Type: "message", Content: []responses.OutputText{{Type: "output_text", Text: text}}}}},
		&responses.ResponsePlan{History: []backends.Message{{Role: "user", Content: text}}})
}

// TestResponseStoreBounds: the store holds at most MaxEntries responses
// and MaxBytes of them, dropping the oldest first; a response larger than
// the store is not kept; MaxBytes < 0 keeps nothing; delete removes one.
func TestResponseStoreBounds(t *testing.T) {
	s := responses.NewResponseStore(responses.ResponseStoreConfig{MaxEntries: 3, MaxBytes: 1 << 20})
	for i := range 5 {
		storedOne(s, fmt.Sprintf("r%d", i), "x")
	}
	if n, _ := s.Len(); n != 3 {
		t.Fatalf("%d entries, want 3", n)
	}
	for i, want := range []bool{false, false, true, true, true} {
		if _, ok := s.Get(fmt.Sprintf("r%d", i)); ok != want {
			t.Errorf("r%d stored %v, want %v", i, ok, want)
		}
	}
	if !s.Delete("r3") || s.Delete("r3") {
		t.Error("delete r3: want true once, then false")
	}
	if _, ok := s.Get("r3"); ok {
		t.Error("r3 is still there after delete")
	}
	n, b := s.Len()
	if n != 2 || b <= 0 {
		t.Fatalf("after delete: %d entries, %d bytes", n, b)
	}

	// Bytes: room for two and a half entries of one size.
	probe := responses.NewResponseStore(responses.ResponseStoreConfig{})
	big := strings.Repeat("y", 1000)
	storedOne(probe, "b0", big)
	_, size := probe.Len()
	one := responses.NewResponseStore(responses.ResponseStoreConfig{MaxEntries: 100, MaxBytes: size * 5 / 2})
	for i := range 4 {
		storedOne(one, fmt.Sprintf("b%d", i), big)
	}
	if n, b := one.Len(); n != 2 || b > size*5/2 {
		t.Fatalf("byte bound %d: %d entries, %d bytes", size*5/2, n, b)
	}
	if _, ok := one.Get("b3"); !ok {
		t.Error("the newest response was dropped instead of the oldest")
	}
	if _, ok := one.Get("b1"); ok {
		t.Error("b1 was kept over the bound")
	}
	storedOne(one, "huge", strings.Repeat("z", int(size)*3))
	if _, ok := one.Get("huge"); ok {
		t.Error("a response larger than the store was stored")
	}
	if _, ok := one.Get("b3"); !ok {
		t.Error("a response too large to store evicted b3")
	}
	off := responses.NewResponseStore(responses.ResponseStoreConfig{MaxBytes: -1})
	storedOne(off, "r", "x")
	if n, _ := off.Len(); n != 0 {
		t.Error("MaxBytes < 0 stored a response")
	}
}

// TestResponseStoreExpiry: a response is forgotten once its lifetime has
// passed (on the bubble's clock), and the bytes it held are released.
func TestResponseStoreExpiry(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := responses.NewResponseStore(responses.ResponseStoreConfig{Lifetime: time.Minute})
		storedOne(s, "old", "x")
		time.Sleep(40 * time.Second)
		storedOne(s, "new", "x")
		time.Sleep(30 * time.Second) // old is 70s old, new 30s
		if _, ok := s.Get("old"); ok {
			t.Error("old outlived its lifetime")
		}
		if _, ok := s.Get("new"); !ok {
			t.Error("new expired early")
		}
		time.Sleep(30 * time.Second)
		if _, ok := s.Get("new"); ok {
			t.Error("new outlived its lifetime")
		}
		if n, b := s.Len(); n != 0 || b != 0 {
			t.Fatalf("after expiry: %d entries, %d bytes", n, b)
		}
	})
}

// TestResponsesPreviousResponseID: a stored response's conversation (its
// input and output) is prepended to the next request that names it, with
// the new request's instructions only; GET returns the stored object,
// input_items its input, DELETE removes it (then GET, DELETE and
// previous_response_id are 404s naming the id); store false stores
// nothing; an expired id is a 404.
func TestResponsesPreviousResponseID(t *testing.T) {
	synctest.Test(t, testResponsesPreviousResponseID)
}

func testResponsesPreviousResponseID(t *testing.T) {
	s, m := respServer(t, echoReply, responses.ResponseStoreConfig{Lifetime: time.Hour})
	w := post(t, s, "/v1/responses", `{"model":"m","instructions":"Be a pirate.","input":"tell me a joke"}`)
	if w.Code != 200 {
		t.Fatalf("status %d: %s", w.Code, w.Body)
	}
	first := decodeObject(t, w)
	id := first["id"].(string)
	w = post(t, s, "/v1/responses", `{"model":"m","previous_response_id":"`+id+`","input":[{"role":"user","content":"explain why this is funny."}]}`)
	if w.Code != 200 {
		t.Fatalf("status %d: %s", w.Code, w.Body)
	}
	want := []backends.Message{
		{Role: "user", Content: "tell me a joke"},
		{Role: "assistant", Content: "echo: tell me a joke"},
		{Role: "user", Content: "explain why this is funny."},
	}
	if got := m.last(t).Messages; !reflect.DeepEqual(got, want) {
		t.Fatalf("messages:\n got %+v\nwant %+v", got, want)
	}
	second := decodeObject(t, w)
	if second["previous_response_id"] != id {
		t.Errorf("previous_response_id echoed as %v", second["previous_response_id"])
	}

	g := do(t, s, "GET", "/v1/responses/"+id, nil)
	if g.Code != 200 || !reflect.DeepEqual(decodeObject(t, g), first) {
		t.Fatalf("GET: %d %s\nwant %v", g.Code, g.Body, first)
	}
	items := decodeObject(t, do(t, s, "GET", "/v1/responses/"+id+"/input_items", nil))
	if items["object"] != "list" || get(items, "data", 0, "type") != "message" || get(items, "data", 0, "role") != "user" ||
		get(items, "data", 0, "content", 0, "text") != "tell me a joke" || items["first_id"] != get(items, "data", 0, "id") || items["has_more"] != false {
		t.Fatalf("input_items: %v", items)
	}

	d := do(t, s, "DELETE", "/v1/responses/"+id, nil)
	if d.Code != 200 || !reflect.DeepEqual(decodeObject(t, d), map[string]any{"id": id, "object": "response", "deleted": true}) {
		t.Fatalf("DELETE: %d %s", d.Code, d.Body)
	}
	for _, w := range []struct {
		what string
		code int
		body string
	}{
		{"GET", do(t, s, "GET", "/v1/responses/"+id, nil).Code, do(t, s, "GET", "/v1/responses/"+id, nil).Body.String()},
		{"DELETE", do(t, s, "DELETE", "/v1/responses/"+id, nil).Code, do(t, s, "DELETE", "/v1/responses/"+id, nil).Body.String()},
		{"previous_response_id", post(t, s, "/v1/responses", `{"model":"m","previous_response_id":"`+id+`","input":"x"}`).Code,
			post(t, s, "/v1/responses", `{"model":"m","previous_response_id":"`+id+`","input":"x"}`).Body.String()},
	} {
		if w.code != 404 || !strings.Contains(w.body, id) || !strings.Contains(w.body, "response_not_found") {
			t.Errorf("%s after delete: %d %s", w.what, w.code, w.body)
		}
	}

	w = post(t, s, "/v1/responses", `{"model":"m","input":"secret","store":false}`)
	unstored := decodeObject(t, w)
	if unstored["store"] != false {
		t.Errorf("store echoed as %v", unstored["store"])
	}
	if g := do(t, s, "GET", "/v1/responses/"+unstored["id"].(string), nil); g.Code != 404 {
		t.Errorf("GET of a store false response: %d %s", g.Code, g.Body)
	}

	w = post(t, s, "/v1/responses", `{"model":"m","input":"soon gone"}`)
	later := decodeObject(t, w)["id"].(string)
	time.Sleep(time.Hour)
	w = post(t, s, "/v1/responses", `{"model":"m","previous_response_id":"`+later+`","input":"x"}`)
	if e := decodeError(t, w); w.Code != 404 || e.Error.Param == nil || *e.Error.Param != "previous_response_id" {
		t.Fatalf("expired id: %d %s", w.Code, w.Body)
	}
}

// TestResponsesFunctionCallRoundTrip: a function_call output continued
// with its function_call_output through previous_response_id reaches the
// model as the assistant's call and the tool's result, named after it.
func TestResponsesFunctionCallRoundTrip(t *testing.T) {
	s, m := respServer(t, callReply, responses.ResponseStoreConfig{})
	tools := `[{"type":"function","name":"get_weather","parameters":{"type":"object","properties":{"city":{"type":"string"}}}}]`
	r := decodeObject(t, post(t, s, "/v1/responses", `{"model":"m","input":"weather in Paris?","tools":`+tools+`}`))
	callID := get(r, "output", 0, "call_id").(string)
	m.reply = echoReply
	body, _ := json.Marshal(map[string]any{"model": "m", "previous_response_id": r["id"], "tools": json.RawMessage(tools),
		"input": []map[string]any{{"type": "function_call_output", "call_id": callID, "output": `{"temp_c":21}`}}})
	w := post(t, s, "/v1/responses", string(body))
	if w.Code != 200 {
		t.Fatalf("status %d: %s", w.Code, w.Body)
	}
	want := []backends.Message{
		{Role: "user", Content: "weather in Paris?"},
		{Role: "assistant", ToolCalls: []backends.ToolCall{{ID: callID, Name: "get_weather", Arguments: `{"city":"Paris"}`}}},
		{Role: "tool", ToolCallID: callID, Name: "get_weather", Content: `{"temp_c":21}`},
	}
	if got := m.last(t).Messages; !reflect.DeepEqual(got, want) {
		t.Fatalf("messages:\n got %+v\nwant %+v", got, want)
	}
	if get(decodeObject(t, w), "output", 0, "content", 0, "text") != `echo: {"temp_c":21}` {
		t.Fatalf("answer: %s", w.Body)
	}
}
