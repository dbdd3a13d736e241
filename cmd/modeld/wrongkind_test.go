package main

import (
	"encoding/json"
	"net/http"
	"slices"
	"strings"
	"testing"
)

// loadedIDs is the daemon's loaded set, from GET /v1/system.
func loadedIDs(t *testing.T, base string) []string {
	t.Helper()
	res, err := http.Get(base + "/v1/system")
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	var sys struct {
		Loaded struct {
			Models []struct {
				ID string `json:"id"`
			} `json:"models"`
		} `json:"loaded"`
	}
	if err := json.NewDecoder(res.Body).Decode(&sys); err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, m := range sys.Loaded.Models {
		ids = append(ids, m.ID)
	}
	slices.Sort(ids)
	return ids
}

// A request of the wrong kind is refused from the model's manifest before
// any load, on every endpoint and dialect, with one error code where the
// dialect's shape has a code: the loaded set is unchanged, even with room
// for one model only (where a load would evict the loaded one). Chat to an
// embedding model while a chat model is loaded, and the reverse.
func TestWrongKindLeavesLoadedSetUnchanged(t *testing.T) {
	home := chatHome(t)
	importFixtures(t, home)
	_, base, _ := startDaemon(t, home, "--max-loaded", "1")
	msgs := []map[string]any{{"role": "user", "content": "hi"}}
	chatKind := func(model string) map[string]map[string]any {
		return map[string]map[string]any{
			"/v1/chat/completions": {"model": model, "messages": msgs, "max_tokens": 2},
			"/v1/completions":      {"model": model, "prompt": "hi", "max_tokens": 2},
			"/v1/messages":         {"model": model, "messages": msgs, "max_tokens": 2},
			"/v1/responses":        {"model": model, "input": "hi", "max_output_tokens": 2},
			"/api/chat":            {"model": model, "messages": msgs, "stream": false},
			"/api/generate":        {"model": model, "prompt": "hi", "stream": false},
		}
	}
	pipelineKind := func(model string) map[string]map[string]any {
		return map[string]map[string]any{
			"/v1/embeddings": {"model": model, "input": "hi"},
			"/api/embed":     {"model": model, "input": "hi"},
			"/v1/classify":   {"model": model, "input": "hi"},
			"/v1/rerank":     {"model": model, "query": "q", "documents": []string{"d"}},
			"/v1/summarize":  {"model": model, "input": "hi"},
		}
	}
	refuse := func(requests map[string]map[string]any, serves string, loaded []string) {
		t.Helper()
		for path, body := range requests {
			status, _, b := call(t, base, path, body)
			if status != http.StatusBadRequest || !strings.Contains(string(b), "serves "+serves) {
				t.Errorf("%s to %v: %d %s, want 400 naming what it serves", path, body["model"], status, b)
				continue
			}
			var e struct {
				Error json.RawMessage `json:"error"`
			}
			_ = json.Unmarshal(b, &e)
			var coded struct {
				Code *string `json:"code"`
			}
			if json.Unmarshal(e.Error, &coded) == nil && !strings.HasPrefix(path, "/v1/messages") {
				if coded.Code == nil || *coded.Code != "wrong_model_type" {
					t.Errorf("%s: error %s, want code wrong_model_type", path, e.Error)
				}
			}
			if got := loadedIDs(t, base); !slices.Equal(got, loaded) {
				t.Fatalf("after %s to %v the loaded set is %v, want %v", path, body["model"], got, loaded)
			}
		}
	}

	callOK(t, base, "/v1/chat/completions", map[string]any{"model": "t/chat", "messages": msgs, "max_tokens": 2}, &map[string]any{})
	if got := loadedIDs(t, base); !slices.Equal(got, []string{"t/chat"}) {
		t.Fatalf("loaded %v after a chat", got)
	}
	refuse(chatKind("t/embed"), "embeddings", []string{"t/chat"})

	callOK(t, base, "/v1/embeddings", map[string]any{"model": "t/embed", "input": "hi"}, &map[string]any{})
	if got := loadedIDs(t, base); !slices.Equal(got, []string{"t/embed"}) {
		t.Fatalf("loaded %v after an embedding (one model at most)", got)
	}
	refuse(pipelineKind("t/chat"), "chat", []string{"t/embed"})
}
