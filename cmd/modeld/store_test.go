package main

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io/fs"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/modeld/modeld/internal/ggufgen"
	"github.com/modeld/modeld/models"
)

func tinyGGUFFile(t *testing.T) (string, []byte) {
	t.Helper()
	var buf bytes.Buffer
	if err := ggufgen.Write(&buf, ggufgen.Tiny(ggufgen.BPE)); err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(t.TempDir(), "tiny.gguf")
	if err := os.WriteFile(p, buf.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	return p, buf.Bytes()
}

// freeAddr returns a loopback address nothing listens on.
func freeAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	return addr
}

func TestStoreCommands(t *testing.T) {
	home := t.TempDir()
	env := map[string]string{"MODELD_HOME": home, "MODELD_LISTEN": freeAddr(t)}
	src, data := tinyGGUFFile(t)

	out, err := runCLI(t, env, "import", src, "--name", "local/tiny")
	if err != nil || !strings.Contains(out, "imported local/tiny (gguf, chat,") || strings.Contains(out, "%") {
		t.Fatalf("import: %v\n%s", err, out)
	}
	out, err = runCLI(t, env, "import", src, "--name", "local/tiny")
	if err == nil || !strings.Contains(err.Error(), "already exists") || !strings.Contains(err.Error(), "--replace") {
		t.Fatalf("second import: %v\n%s", err, out)
	}
	out, err = runCLI(t, env, "import", src)
	if err == nil || !strings.Contains(err.Error(), "--name is required") {
		t.Fatalf("import without --name: %v\n%s", err, out)
	}

	out, err = runCLI(t, env, "ls")
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if len(lines) != 2 || !strings.HasPrefix(lines[0], "ID") || !strings.Contains(lines[0], "QUANT") {
		t.Fatalf("ls:\n%s", out)
	}
	if f := strings.Fields(lines[1]); f[0] != "local/tiny" || f[1] != "chat" || f[2] != "gguf" || f[3] != "F32" {
		t.Errorf("ls row %q", lines[1])
	}
	out, err = runCLI(t, env, "ls", "--json")
	var entries []listEntry
	if err != nil || json.Unmarshal([]byte(out), &entries) != nil || len(entries) != 1 || entries[0].SizeBytes != int64(len(data)) {
		t.Fatalf("ls --json: %v\n%s", err, out)
	}

	out, err = runCLI(t, env, "show", "local/tiny")
	sum := sha256.Sum256(data)
	for _, want := range []string{"architecture", "llama", "context length", "2048", "chat template", "yes", "sha256:" + hex.EncodeToString(sum[:]), "imported from " + src} {
		if err != nil || !strings.Contains(out, want) {
			t.Errorf("show lacks %q: %v\n%s", want, err, out)
		}
	}
	if out, err := runCLI(t, env, "show", "local/none"); err == nil || !strings.Contains(err.Error(), "model not found") {
		t.Errorf("show of a missing model: %v %s", err, out)
	}

	// du's total is what is on disk under the store.
	out, err = runCLI(t, env, "du", "--json")
	var u models.Usage
	if err != nil || json.Unmarshal([]byte(out), &u) != nil {
		t.Fatalf("du --json: %v\n%s", err, out)
	}
	var onDisk int64
	_ = filepath.WalkDir(filepath.Join(home, "models"), func(p string, d fs.DirEntry, err error) error {
		if err == nil && d.Type().IsRegular() {
			fi, _ := d.Info()
			onDisk += fi.Size()
		}
		return nil
	})
	if u.Total != onDisk || len(u.Models) != 1 || u.Models[0].Unique != int64(len(data)) {
		t.Errorf("du total %d, on disk %d, models %+v", u.Total, onDisk, u.Models)
	}
	if out, err := runCLI(t, env, "du"); err != nil || !strings.Contains(out, "local/tiny") || !strings.Contains(out, "total") {
		t.Errorf("du: %v\n%s", err, out)
	}

	// No daemon listens: rm changes the store directly.
	out, err = runCLI(t, env, "rm", "local/tiny")
	if err != nil || !strings.Contains(out, "deleted local/tiny (freed "+humanBytes(int64(len(data)))+")") {
		t.Errorf("rm: %v\n%s", err, out)
	}
	if out, err := runCLI(t, env, "rm", "local/tiny"); err == nil || !strings.Contains(err.Error(), "model not found") {
		t.Errorf("rm of a missing model: %v %s", err, out)
	}
	if out, err := runCLI(t, env, "rm", "../x"); err == nil || !strings.Contains(err.Error(), "invalid model id") {
		t.Errorf("rm of a hostile id: %v %s", err, out)
	}

	// prune removes a leftover and reports the bytes.
	if err := os.WriteFile(filepath.Join(home, "models", "partials", "sha256-"+strings.Repeat("0", 64)+".partial"), make([]byte, 4096), 0o644); err != nil {
		t.Fatal(err)
	}
	out, err = runCLI(t, env, "prune")
	if err != nil || !strings.Contains(out, "freed 4.0 KiB") {
		t.Errorf("prune: %v\n%s", err, out)
	}
}

// rm goes through a listening daemon: in use is refused with how to force.
func TestRemoveThroughDaemon(t *testing.T) {
	var calls []string
	home := t.TempDir()
	daemon := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		if r.URL.Path == "/v1/system" {
			fmt.Fprintf(w, `{"config":{"home":{"value":%q}}}`, home)
			return
		}
		calls = append(calls, r.Method+" "+r.URL.RequestURI())
		if r.URL.Query().Get("force") != "true" {
			w.WriteHeader(http.StatusConflict)
			fmt.Fprint(w, `{"error":{"message":"unload \"local/tiny\": model in use: 1 requests in flight, 0 queued","type":"invalid_request_error","param":null,"code":"model_in_use"}}`)
			return
		}
		fmt.Fprint(w, `{"id":"local/tiny","object":"model","deleted":true,"freed_bytes":2048}`)
	}))
	defer daemon.Close()
	env := map[string]string{"MODELD_HOME": home, "MODELD_LISTEN": strings.TrimPrefix(daemon.URL, "http://")}
	out, err := runCLI(t, env, "rm", "local/tiny")
	if err == nil || !strings.Contains(err.Error(), "in use by the daemon") || !strings.Contains(err.Error(), "modeld rm --force local/tiny") {
		t.Fatalf("rm of a busy model: %v\n%s", err, out)
	}
	out, err = runCLI(t, env, "rm", "--force", "local/tiny")
	if err != nil || !strings.Contains(out, "deleted local/tiny (freed 2.0 KiB; unloaded by the daemon)") {
		t.Fatalf("rm --force: %v\n%s", err, out)
	}
	if want := "DELETE /v1/models/local/tiny;DELETE /v1/models/local/tiny?force=true"; strings.Join(calls, ";") != want {
		t.Errorf("daemon calls %v", calls)
	}
}

// pull speaks to the hub named by MODELD_HF_ENDPOINT and honours MODELD_OFFLINE.
func TestPullCommand(t *testing.T) {
	_, data := tinyGGUFFile(t)
	sum := sha256.Sum256(data)
	sha := hex.EncodeToString(sum[:])
	commit := strings.Repeat("cd", 20)
	var auth []string
	hub := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		auth = append(auth, r.Header.Get("Authorization"))
		switch {
		case strings.HasSuffix(r.URL.Path, "/api/models/org/tiny/revision/main"):
			fmt.Fprintf(w, `{"sha":%q}`, commit)
		case strings.HasSuffix(r.URL.Path, "/api/models/org/tiny/tree/"+commit):
			fmt.Fprintf(w, `[{"type":"file","path":"tiny-F32.gguf","size":%d,"oid":"x","lfs":{"oid":%q,"size":%d,"pointerSize":100}}]`, len(data), sha, len(data))
		case r.URL.Path == "/org/tiny/resolve/"+commit+"/tiny-F32.gguf":
			w.Header().Set("X-Linked-Etag", `"`+sha+`"`)
			http.ServeContent(w, r, "x", time.Time{}, bytes.NewReader(data))
		default:
			http.NotFound(w, r)
		}
	}))
	defer hub.Close()
	home := t.TempDir()
	env := map[string]string{"MODELD_HOME": home, "MODELD_HF_ENDPOINT": hub.URL, "HF_TOKEN": "hf_t"}
	out, err := runCLI(t, env, "pull", "hf:org/tiny")
	if err != nil || strings.Contains(out, "tiny-F32.gguf: ") || !strings.Contains(out, "pulled org/tiny (gguf, chat,") {
		t.Fatalf("pull: %v\n%s", err, out)
	}
	for _, a := range auth {
		if a != "Bearer hf_t" {
			t.Errorf("hub request with Authorization %q", a)
		}
	}
	env["MODELD_OFFLINE"] = "1"
	n := len(auth)
	out, err = runCLI(t, env, "pull", "hf:org/tiny", "--name", "again")
	if err == nil || !strings.Contains(err.Error(), "offline") || len(auth) != n {
		t.Errorf("offline pull: %v\n%s", err, out)
	}
}

func TestProgressPrinterTerminalBars(t *testing.T) {
	var buf bytes.Buffer
	pp := newProgressPrinter(&buf)
	pp.tty, pp.now = true, stepClock(time.Second) // a file that takes time
	pp.event(models.Progress{Status: models.StatusResolving + " hf:org/x"})
	for _, n := range []int64{0, 512, 1024} {
		pp.event(models.Progress{Status: models.StatusPulling + " onnx/model.onnx", File: "onnx/model.onnx", Total: 1024, Completed: n})
	}
	pp.event(models.Progress{Status: models.StatusExists, File: "config.json", Total: 10, Completed: 10})
	pp.event(models.Progress{Status: models.StatusSuccess})
	pp.finishBar()
	out := buf.String()
	for _, want := range []string{"resolving hf:org/x", "onnx/model.onnx", "100%", "1.0 kB", "config.json: already in the store"} {
		if !strings.Contains(out, want) {
			t.Errorf("terminal output lacks %q:\n%s", want, out)
		}
	}
}

// stepClock is a clock that advances by step at each reading.
func stepClock(step time.Duration) func() time.Time {
	t := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	return func() time.Time { t = t.Add(step); return t }
}

// Progress shows only for a file that takes time: a file copied at once
// prints no 0% and 100% lines; one that runs past progressDelay prints
// its steps from then on.
func TestProgressOnlyForFilesThatTakeTime(t *testing.T) {
	var buf bytes.Buffer
	pp := newProgressPrinter(&buf)
	clock := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	pp.now = func() time.Time { return clock }
	ev := func(file string, done int64) {
		pp.event(models.Progress{Status: models.StatusPulling + " " + file, File: file, Total: 1000, Completed: done})
	}
	ev("tiny.json", 0)
	ev("tiny.json", 1000)
	ev("big.onnx", 0)
	clock = clock.Add(progressDelay / 2)
	ev("big.onnx", 100)
	clock = clock.Add(progressDelay)
	ev("big.onnx", 300)
	ev("big.onnx", 1000)
	out := buf.String()
	if strings.Contains(out, "tiny.json") || strings.Contains(out, "  0%") || strings.Contains(out, " 10%") {
		t.Errorf("progress for a quick file or before the delay:\n%s", out)
	}
	for _, want := range []string{"big.onnx:  30%", "big.onnx: 100%"} {
		if !strings.Contains(out, want) {
			t.Errorf("progress lacks %q:\n%s", want, out)
		}
	}
}
