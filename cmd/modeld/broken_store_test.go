package main

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"math"
	"net/http"
	"os"
	"path/filepath"
	goruntime "runtime"
	"strconv"
	"strings"
	"testing"

	"github.com/modeld/modeld/internal/ggufgen"
	"github.com/modeld/modeld/internal/testenv"
	"github.com/modeld/modeld/models"
)

// plantBlockCountEdit imports a valid chat model as id, then does what a
// store written by an older modeld (which took any block count) holds: the
// model's blob replaced by its 4-byte edit llama.block_count = 2^32-1, under
// its own correct digest, and the manifest pointing at it. Nothing of the
// import path checks it again.
func plantBlockCountEdit(t *testing.T, home, id string) {
	t.Helper()
	if out, err := runCLI(t, map[string]string{"MODELD_HOME": home}, "import", testenv.LlamaChatModel(t, "qwen2", "Qwen-Qwen2.5-7B-Instruct"), "--name", id); err != nil {
		t.Fatalf("import: %v\n%s", err, out)
	}
	st := openStoreAt(t, home)
	m, err := st.Get(id)
	if err != nil {
		t.Fatal(err)
	}
	path, err := st.FilePath(m, m.GGUF.File)
	if err != nil {
		t.Fatal(err)
	}
	good, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	bad, err := ggufgen.EditU32(good, "llama.block_count", math.MaxUint32)
	if err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(bad)
	digest := "sha256:" + hex.EncodeToString(sum[:])
	blob, err := st.BlobPath(digest)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(blob, bad, 0o644); err != nil {
		t.Fatal(err)
	}
	for i := range m.Files {
		if m.Files[i].Path == m.GGUF.File {
			m.Files[i].Digest = digest
		}
	}
	m.GGUF.BlockCount = math.MaxUint32 // what the older import recorded
	if err := st.CommitManifest(m); err != nil {
		t.Fatal(err)
	}
}

// A store that already holds the 4-byte-edited model must not kill a
// restarted daemon: chat, tokenize, a load-only generate and the Anthropic
// route each answer 422 in their dialect's error shape, naming the bound
// that failed; /v1/models and `modeld ls` mark the model broken; the daemon
// stays alive and serves; `modeld rm` removes the model. Before the header scan ran in placement, the first of these
// requests ended the daemon with "fatal error: out of memory".
func TestDaemonSurvivesStoredBlockCountEdit(t *testing.T) {
	home := t.TempDir()
	const id = "evil/blocks"
	plantBlockCountEdit(t, home, id)
	cmd, base, logs := startDaemon(t, home)
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("daemon log:\n%.8000s", logs)
		}
	})
	says := func(what string, status int, body []byte, msg string) {
		t.Helper()
		if status != http.StatusUnprocessableEntity {
			t.Fatalf("%s = %d, want 422: %.1000s", what, status, body)
		}
		for _, want := range []string{"llama.block_count", "4294967295", "limit of 512", "modeld rm"} {
			if !strings.Contains(msg, want) {
				t.Fatalf("%s: message %q does not say %q", what, msg, want)
			}
		}
	}
	// The listings say so, from the manifest alone.
	res, err := http.Get(base + "/v1/models")
	if err != nil {
		t.Fatal(err)
	}
	var list struct {
		Data []struct{ ID, Broken string }
	}
	err = json.NewDecoder(res.Body).Decode(&list)
	res.Body.Close()
	if err != nil || len(list.Data) != 1 || !strings.Contains(list.Data[0].Broken, "llama.block_count is 4294967295") {
		t.Fatalf("/v1/models = %+v, %v", list, err)
	}
	out, err := runCLI(t, map[string]string{"MODELD_HOME": home}, "ls", "--json")
	if err != nil || !strings.Contains(out, `"broken": "llama.block_count is 4294967295`) {
		t.Fatalf("ls --json: %v\n%s", err, out)
	}

	chat := map[string]any{"model": id, "messages": []map[string]any{{"role": "user", "content": "hi"}}, "max_tokens": 4}
	for _, path := range []string{"/v1/chat/completions", "/v1/tokenize"} {
		body := chat
		if path == "/v1/tokenize" {
			body = map[string]any{"model": id, "content": "hello"}
		}
		status, _, b := call(t, base, path, body)
		var e apiError
		if err := json.Unmarshal(b, &e); err != nil {
			t.Fatalf("%s: not an OpenAI error: %s", path, b)
		}
		says(path, status, b, e.Error.Message)
		if e.Error.Code != "invalid_model" {
			t.Fatalf("%s: code %v, want invalid_model", path, e.Error.Code)
		}
	}
	status, _, b := call(t, base, "/api/generate", map[string]any{"model": id})
	var oe struct {
		Error string `json:"error"`
	}
	if err := json.Unmarshal(b, &oe); err != nil {
		t.Fatalf("/api/generate: not an Ollama error: %s", b)
	}
	says("/api/generate (load only)", status, b, oe.Error)
	status, _, b = call(t, base, "/v1/messages", map[string]any{"model": id, "max_tokens": 4, "messages": []map[string]any{{"role": "user", "content": "hi"}}})
	var ae struct {
		Type  string `json:"type"`
		Error struct {
			Type, Message string
		} `json:"error"`
	}
	if err := json.Unmarshal(b, &ae); err != nil || ae.Type != "error" {
		t.Fatalf("/v1/messages: not an Anthropic error: %s", b)
	}
	says("/v1/messages", status, b, ae.Error.Message)

	// Alive and serving.
	if cmd.ProcessState != nil {
		t.Fatalf("the daemon exited: %v", cmd.ProcessState)
	}
	res, err = http.Get(base + "/health")
	if err != nil {
		t.Fatalf("/health after the requests: %v", err)
	}
	res.Body.Close()
	if res.StatusCode != 200 {
		t.Fatalf("/health = %d", res.StatusCode)
	}
	if strings.Contains(logs.String(), "fatal error") {
		t.Fatal("the daemon logged a fatal error")
	}
	if goruntime.GOOS == "linux" { // the daemon's peak memory stayed small
		status, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", cmd.Process.Pid))
		if err != nil {
			t.Fatal(err)
		}
		var peakKiB int64
		for _, line := range strings.Split(string(status), "\n") {
			if v, ok := strings.CutPrefix(line, "VmHWM:"); ok {
				peakKiB, _ = strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 10, 64)
			}
		}
		if peakKiB <= 0 || peakKiB > 1<<20 {
			t.Fatalf("daemon peak RSS %d KiB (want under 1 GiB)", peakKiB)
		}
		t.Logf("daemon peak RSS %d MiB", peakKiB>>10)
	}

	// rm works, through the running daemon.
	if out, err := runCLI(t, map[string]string{"MODELD_HOME": home}, "rm", id); err != nil {
		t.Fatalf("rm: %v\n%s", err, out)
	}
	if _, err := openStoreAt(t, home).Get(id); err == nil || !strings.Contains(err.Error(), models.ErrNotFound.Error()) {
		t.Fatalf("after rm: %v", err)
	}
	blobs, err := filepath.Glob(filepath.Join(home, "models", "blobs", "sha256-*"))
	if err != nil || len(blobs) != 0 {
		t.Fatalf("blobs left after rm: %v %v", blobs, err)
	}
}
