package api

import (
	"io/fs"
	"os"
	"path/filepath"
	"testing"
)

// storeFiles reads every file under the store's root: what a refused
// request must leave byte for byte as it was.
func storeFiles(t *testing.T, root string) map[string]string {
	t.Helper()
	out := map[string]string{}
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := os.ReadFile(p)
		out[p] = string(b)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// A copy onto a name that is already a model is refused (409, Ollama's
// shape) and leaves the store byte-identical: before, /api/copy silently
// replaced org/plain with org/chat's files.
func TestOllamaCopyRefusesExistingDestination(t *testing.T) {
	e := ollamaServer(t, "")
	before := storeFiles(t, e.store.Root())
	for _, dst := range []string{"org/plain", "org/plain:latest", "Org/Plain"} {
		ollamaErr(t, e.call(t, "POST", "/api/copy", `{"source": "org/chat", "destination": "`+dst+`"}`), 409, "destination model 'org/plain' already exists")
	}
	after := storeFiles(t, e.store.Root())
	if len(after) != len(before) {
		t.Fatalf("the store had %d files, now %d", len(before), len(after))
	}
	for p, b := range before {
		if after[p] != b {
			t.Errorf("%s changed", p)
		}
	}
	// A copy onto itself changes nothing, as Ollama has it.
	if w := e.call(t, "POST", "/api/copy", `{"source": "org/chat", "destination": "org/chat:latest"}`); w.Code != 200 {
		t.Errorf("copy onto itself: %d %s", w.Code, w.Body)
	}
	if got := storeFiles(t, e.store.Root()); len(got) != len(before) {
		t.Errorf("a copy onto itself changed the store: %d files, had %d", len(got), len(before))
	}
}

// /api/delete deletes exactly the model it names: ids are lowercase, so
// "Org/Chat" names no model and deletes nothing (before, it deleted
// org/chat); "org/chat" deletes it.
func TestOllamaDeleteTakesTheExactName(t *testing.T) {
	e := ollamaServer(t, "")
	ollamaErr(t, e.call(t, "DELETE", "/api/delete", `{"model": "Org/Chat"}`), 404, "model 'Org/Chat' not found")
	if _, err := e.store.Get("org/chat"); err != nil {
		t.Fatalf("delete of Org/Chat removed org/chat: %v", err)
	}
	if w := e.call(t, "DELETE", "/api/delete", `{"model": "org/chat"}`); w.Code != 200 {
		t.Fatalf("delete org/chat: %d %s", w.Code, w.Body)
	}
	if _, err := e.store.Get("org/chat"); err == nil {
		t.Error("org/chat is still there")
	}
	if _, err := e.store.Get("org/plain"); err != nil {
		t.Errorf("org/plain went with it: %v", err)
	}
}
