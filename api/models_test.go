package api

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modeld/modeld/api/core"
	"github.com/modeld/modeld/api/store"
	"github.com/modeld/modeld/cache"
	"github.com/modeld/modeld/internal/ggufgen"
	"github.com/modeld/modeld/models"
	"github.com/modeld/modeld/models/hub"
)

func tinyGGUF(t *testing.T) []byte {
	t.Helper()
	var buf bytes.Buffer
	if err := ggufgen.Write(&buf, ggufgen.Tiny(ggufgen.SPM)); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// storeWithModels returns a store holding "org/chat" (GGUF) and "org/embed" (ONNX).
func storeWithModels(t *testing.T) *models.Store {
	t.Helper()
	st, err := models.Open(t.TempDir(), models.Options{})
	if err != nil {
		t.Fatal(err)
	}
	src := filepath.Join(t.TempDir(), "tiny.gguf")
	if err := os.WriteFile(src, tinyGGUF(t), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := st.Import(context.Background(), src, models.ImportOptions{Name: "org/chat"}, nil); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	onnx := append([]byte{0x08, 0x08, 0x3a, 0x04}, 1, 2, 3, 4)
	for p, b := range map[string][]byte{
		"config.json": []byte(`{"architectures":["BertModel"],"max_position_embeddings":256}`), "tokenizer.json": []byte(`{}`),
		"tokenizer_config.json": []byte(`{}`), "onnx/model.onnx": onnx,
	} {
		full := filepath.Join(dir, p)
		if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(full, b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := st.Import(context.Background(), dir, models.ImportOptions{Name: "org/embed"}, nil); err != nil {
		t.Fatal(err)
	}
	return st
}

type fakeUnloader struct {
	mu    sync.Mutex
	err   error
	calls []string
}

func (f *fakeUnloader) Unload(_ context.Context, id string, wait bool) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls = append(f.calls, fmt.Sprintf("%s wait=%v", id, wait))
	if wait {
		return nil
	}
	return f.err
}

func TestModelsListAndGet(t *testing.T) {
	s := newTestServer(t)
	st := storeWithModels(t)
	s.RegisterModels(core.ModelsOptions{Store: st})
	w := do(t, s, "GET", "/v1/models", nil)
	if w.Code != 200 {
		t.Fatalf("GET /v1/models = %d %s", w.Code, w.Body)
	}
	var list struct {
		Object string              `json:"object"`
		Data   []store.ModelObject `json:"data"`
	}
	if err := json.Unmarshal(w.Body.Bytes(), &list); err != nil {
		t.Fatal(err)
	}
	if list.Object != "list" || len(list.Data) != 2 {
		t.Fatalf("list = %s", w.Body)
	}
	chat, embed := list.Data[0], list.Data[1]
	if chat.ID != "org/chat" || chat.Object != "model" || chat.Task != models.TaskChat || chat.Format != models.FormatGGUF ||
		chat.SizeBytes == 0 || chat.ContextLength != 2048 || chat.OwnedBy != "modeld" || chat.Created == 0 || chat.Files != nil {
		t.Errorf("chat entry = %+v", chat)
	}
	if embed.ID != "org/embed" || embed.Task != models.TaskEmbed || embed.Format != models.FormatONNX || embed.ContextLength != 256 || embed.Quantization != "fp32" {
		t.Errorf("embed entry = %+v", embed)
	}

	w = do(t, s, "GET", "/v1/models/org/chat", nil)
	var one store.ModelObject
	if err := json.Unmarshal(w.Body.Bytes(), &one); err != nil || w.Code != 200 {
		t.Fatalf("GET /v1/models/org/chat = %d %s", w.Code, w.Body)
	}
	if one.ID != "org/chat" || len(one.Files) != 1 || one.GGUF == nil || !one.GGUF.ChatTemplate || one.Source == nil {
		t.Errorf("detail = %s", w.Body)
	}
	w = do(t, s, "GET", "/v1/models/org/nope", nil)
	if e := decodeError(t, w); w.Code != 404 || e.Error.Code != "model_not_found" {
		t.Errorf("unknown model = %d %s", w.Code, w.Body)
	}
	w = do(t, s, "GET", "/v1/models/Org/..%2F..%2Fetc", nil)
	if decodeError(t, w); w.Code != 400 {
		t.Errorf("hostile id = %d %s", w.Code, w.Body)
	}
}

func TestModelsDelete(t *testing.T) {
	s := newTestServer(t)
	st := storeWithModels(t)
	un := &fakeUnloader{err: fmt.Errorf("unload %q: %w: 2 requests in flight, 0 queued", "org/chat", cache.ErrInUse)}
	s.RegisterModels(core.ModelsOptions{Store: st, Unloader: un})

	w := do(t, s, "DELETE", "/v1/models/org/chat", nil)
	e := decodeError(t, w)
	if w.Code != http.StatusConflict || e.Error.Code != "model_in_use" || !strings.Contains(e.Error.Message, "--force") {
		t.Fatalf("delete of a busy model = %d %s", w.Code, w.Body)
	}
	if _, err := st.Get("org/chat"); err != nil {
		t.Fatalf("a busy model was deleted: %v", err)
	}
	w = do(t, s, "DELETE", "/v1/models/org/chat?force=true", nil)
	var del struct {
		ID      string `json:"id"`
		Object  string `json:"object"`
		Deleted bool   `json:"deleted"`
		Freed   int64  `json:"freed_bytes"`
	}
	if err := json.Unmarshal(w.Body.Bytes(), &del); err != nil || w.Code != 200 || del.ID != "org/chat" || del.Object != "model" || !del.Deleted || del.Freed == 0 {
		t.Fatalf("forced delete = %d %s", w.Code, w.Body)
	}
	un.err = fmt.Errorf("unload: %w", cache.ErrNotLoaded)
	if w := do(t, s, "DELETE", "/v1/models/org/embed", nil); w.Code != 200 {
		t.Errorf("delete of an unloaded model = %d %s", w.Code, w.Body)
	}
	if w := do(t, s, "DELETE", "/v1/models/org/embed", nil); w.Code != 404 {
		t.Errorf("second delete = %d %s", w.Code, w.Body)
	}
	want := []string{"org/chat wait=false", "org/chat wait=true", "org/embed wait=false"}
	if strings.Join(un.calls, ";") != strings.Join(want, ";") {
		t.Errorf("unload calls %v, want %v", un.calls, want)
	}
	if ms, _ := st.List(); len(ms) != 0 {
		t.Errorf("models left: %v", ms)
	}
}

// miniHub serves one GGUF file the way the hub does (listing with LFS sha256,
// resolve with X-Linked-Etag), enough for the pull route.
func miniHub(t *testing.T, name string, body []byte) *httptest.Server {
	t.Helper()
	sum := sha256.Sum256(body)
	sha := hex.EncodeToString(sum[:])
	commit := strings.Repeat("ab", 20)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !strings.Contains(r.URL.Path, "/org/tiny/") {
			http.Error(w, `{"error":"Repository not found"}`, http.StatusNotFound)
			return
		}
		switch {
		case strings.HasSuffix(r.URL.Path, "/revision/main"):
			fmt.Fprintf(w, `{"sha":%q}`, commit)
		case strings.Contains(r.URL.Path, "/tree/"):
			fmt.Fprintf(w, `[{"type":"file","path":%q,"size":%d,"oid":"x","lfs":{"oid":%q,"size":%d,"pointerSize":100}}]`, name, len(body), sha, len(body))
		case strings.HasSuffix(r.URL.Path, "/resolve/"+commit+"/"+name):
			w.Header().Set("X-Linked-Etag", `"`+sha+`"`)
			w.Header().Set("X-Repo-Commit", commit)
			http.ServeContent(w, r, name, time.Time{}, bytes.NewReader(body))
		default:
			http.NotFound(w, r)
		}
	}))
	t.Cleanup(srv.Close)
	return srv
}

func TestModelsPullStreamsNDJSON(t *testing.T) {
	body := tinyGGUF(t)
	fakeHub := miniHub(t, "tiny-Q4_0.gguf", body)
	st, err := models.Open(t.TempDir(), models.Options{})
	if err != nil {
		t.Fatal(err)
	}
	pl, err := hub.NewPuller(st, hub.PullConfig{Endpoint: fakeHub.URL, ProgressStep: 64 << 10})
	if err != nil {
		t.Fatal(err)
	}
	s := newTestServer(t)
	s.RegisterModels(core.ModelsOptions{Store: st, Puller: pl})
	srv := httptest.NewServer(s.Handler())
	defer srv.Close()

	post := func(body string) (*http.Response, []map[string]any) {
		resp, err := http.Post(srv.URL+"/v1/models/pull", "application/json", strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var lines []map[string]any
		sc := bufio.NewScanner(resp.Body)
		for sc.Scan() {
			var m map[string]any
			if err := json.Unmarshal(sc.Bytes(), &m); err != nil {
				t.Fatalf("line %q is not JSON: %v", sc.Text(), err)
			}
			lines = append(lines, m)
		}
		return resp, lines
	}
	resp, lines := post(`{"model":"hf:org/tiny:Q4_0"}`)
	if resp.StatusCode != 200 || resp.Header.Get("Content-Type") != "application/x-ndjson" {
		t.Fatalf("status %d type %q", resp.StatusCode, resp.Header.Get("Content-Type"))
	}
	last := lines[len(lines)-1]
	if last["status"] != "success" || last["model"] != "org/tiny:q4_0" {
		t.Errorf("last line %v", last)
	}
	var sawTotal bool
	for _, l := range lines {
		if l["total"] == float64(len(body)) && l["completed"] == float64(len(body)) && strings.HasPrefix(fmt.Sprint(l["digest"]), "sha256:") {
			sawTotal = true
		}
	}
	if !sawTotal {
		t.Errorf("no progress line reached the total: %v", lines)
	}
	if _, err := st.Get("org/tiny:q4_0"); err != nil {
		t.Errorf("pulled model not in the store: %v", err)
	}

	resp, lines = post(`{"model":"hf:org/missing:Q4_0"}`)
	last = lines[len(lines)-1]
	errObj, _ := last["error"].(map[string]any)
	if resp.StatusCode != 200 || last["status"] != "error" || errObj == nil || errObj["message"] == "" || errObj["type"] == "" {
		t.Errorf("failed pull ended with %v", last)
	}
	for _, bad := range []string{`{`, `{"name":"x"}`} {
		resp, _ := post(bad)
		if resp.StatusCode != 400 {
			t.Errorf("POST %s = %d", bad, resp.StatusCode)
		}
	}
	if resp, _ := post(`{"model":"nonsense"}`); resp.StatusCode != 400 {
		t.Errorf("bad ref status %d, want 400 before any streaming", resp.StatusCode)
	}
}
