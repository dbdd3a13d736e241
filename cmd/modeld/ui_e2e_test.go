package main

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modeld/modeld/internal/ggufgen"
	"github.com/modeld/modeld/ui"
)

// uiHub is a fake model hub with two GGUF repositories: org/tiny, served
// whole, and org/slow, whose file (ranges honoured) gives its first half
// and then stalls until the request ends; slowActive counts the requests
// for it still open.
type uiHub struct {
	*httptest.Server
	slowActive atomic.Int64
}

// stallReader is a file that reads as data up to limit and then blocks
// until done is closed.
type stallReader struct {
	*bytes.Reader
	limit int64
	done  <-chan struct{}
}

func (s *stallReader) Read(p []byte) (int, error) {
	pos, _ := s.Seek(0, io.SeekCurrent)
	if pos >= s.limit {
		<-s.done
		return 0, io.ErrUnexpectedEOF
	}
	return s.Reader.Read(p[:min(int64(len(p)), s.limit-pos)])
}

func newUIHub(t *testing.T, tiny []byte) *uiHub {
	t.Helper()
	slow := bytes.Repeat([]byte("modeld-slow-"), 1<<18) // 3 MiB
	h := &uiHub{}
	commit := strings.Repeat("ab", 20)
	digest := func(b []byte) string { s := sha256.Sum256(b); return hex.EncodeToString(s[:]) }
	repos := map[string][]byte{"tiny": tiny, "slow": slow}
	h.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		for name, data := range repos {
			file := name + "-Q4_0.gguf"
			switch {
			case strings.HasSuffix(r.URL.Path, "/api/models/org/"+name+"/revision/main"):
				fmt.Fprintf(w, `{"sha":%q}`, commit)
				return
			case strings.HasSuffix(r.URL.Path, "/api/models/org/"+name+"/tree/"+commit):
				fmt.Fprintf(w, `[{"type":"file","path":%q,"size":%d,"oid":"x","lfs":{"oid":%q,"size":%d,"pointerSize":100}}]`,
					file, len(data), digest(data), len(data))
				return
			case r.URL.Path == "/org/"+name+"/resolve/"+commit+"/"+file:
				w.Header().Set("X-Linked-Etag", `"`+digest(data)+`"`)
				if name == "tiny" {
					http.ServeContent(w, r, file, time.Time{}, bytes.NewReader(data))
					return
				}
				h.slowActive.Add(1)
				defer h.slowActive.Add(-1)
				http.ServeContent(w, r, file, time.Time{}, &stallReader{Reader: bytes.NewReader(data), limit: int64(len(data) / 2), done: r.Context().Done()})
				return
			}
		}
		http.NotFound(w, r)
	}))
	t.Cleanup(h.Close)
	return h
}

// screenshotDir is where the browser test writes its screenshots:
// $MODELD_SCREENSHOT_DIR when set (CI keeps it), else a test temp dir.
func screenshotDir(t *testing.T) string {
	t.Helper()
	dir := os.Getenv("MODELD_SCREENSHOT_DIR")
	if dir == "" {
		return t.TempDir()
	}
	dir = filepath.Join(dir, t.Name())
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	return dir
}

// TestLocalModelsPageInBrowser drives the Local Models page in Debian's
// chromium (clients/ui.mjs, playwright-core) against a real daemon with a
// chat model (GGUF, a runner), ONNX embedding and classification models, a
// spare model and a fake hub: the models are listed with the sizes the API
// gives and the store's disk total; a delete (confirmed) removes one; a
// pull moves its bar to 100% and the model appears; a cancelled pull makes
// the daemon stop its download and leaves no model; a chat streams and Stop
// ends it, which the daemon's metrics count as a cancelled generation;
// embed and classify answer; the probe panel lists every backend; a daemon
// with an API key gets it from the page's key dialog, and shows its model
// loaded on its GPU (Mesa's software Vulkan device) and the GPU in its probe
// panel. The page must raise no error (a Content-Security-Policy violation
// included).
func TestLocalModelsPageInBrowser(t *testing.T) {
	if _, err := os.Stat("/usr/bin/chromium"); err != nil {
		t.Fatal("chromium is not installed: apt-get install chromium")
	}
	home := longChatHome(t) // t/chat streams for as long as the test needs
	env := map[string]string{"MODELD_HOME": home}
	spare := filepath.Join(t.TempDir(), "spare.gguf")
	if err := ggufgen.WriteFile(spare, ggufgen.Tiny(ggufgen.BPE)); err != nil {
		t.Fatal(err)
	}
	for src, id := range map[string]string{fixtureDir("embed-mean"): "t/embed", fixtureDir("classify"): "t/classify", spare: "t/spare"} {
		if out, err := runCLI(t, env, "import", src, "--name", id); err != nil {
			t.Fatalf("import %s: %v\n%s", id, err, out)
		}
	}
	_, tiny := tinyGGUFFile(t)
	hub := newUIHub(t, tiny)
	_, base, logs := startDaemon(t, home, "--context-size", "16384", "--hf-endpoint", hub.URL, "--allow-private-pull")
	// A second daemon, with an API key and a GPU (Mesa's software Vulkan
	// device), on a home of its own (one daemon serves a home); its chat
	// model is loaded on the GPU before the page opens.
	vkRoot := vkLibRoot(t, true)
	requireLLVMPipe(t, vkRoot)
	keyHome := vkHome(t)
	const key = "mk-ui-test-5e1f"
	keyed := startVKDaemon(t, keyHome, vkRoot, "--allow-software-gpu", "--api-key", key)
	keyBase := keyed.base
	warm, _ := http.NewRequest(http.MethodPost, keyBase+"/v1/chat/completions", strings.NewReader(
		`{"model":"`+vkChatModel+`","max_tokens":1,"messages":[{"role":"user","content":"hi"}]}`))
	warm.Header.Set("Authorization", "Bearer "+key)
	if res, err := http.DefaultClient.Do(warm); err != nil || res.StatusCode != 200 {
		t.Fatalf("loading %s on the keyed daemon: %v %v\n%s", vkChatModel, res, err, keyed.log())
	} else {
		res.Body.Close()
	}
	defer func() {
		if t.Failed() {
			t.Logf("daemon log:\n%s", logs)
		}
	}()
	shots := screenshotDir(t)
	t.Logf("screenshots in %s", shots)

	raw := runClient(t, base, "ui.mjs", map[string]string{
		"SCREENSHOT_DIR": shots, "CHAT_MODEL": "t/long", "EMBED_MODEL": "t/embed", "CLASSIFY_MODEL": "t/classify",
		"DELETE_MODEL": "t/spare", "PULL_REF": "hf:org/tiny:Q4_0", "PULLED_MODEL": "org/tiny", "SLOW_REF": "hf:org/slow:Q4_0",
		"KEY_URL": keyBase, "KEY": key, "GPU_MODEL": vkChatModel,
	})
	var out struct {
		CSP    string
		Models []struct {
			ID, Size  string
			SizeBytes int64
		}
		DiskTotal          int64
		Backends           []struct{ Kind, Usable, Reason string }
		ConfirmText        string
		PullFiles          []struct{ File, Pct string }
		Pulled             string
		SlowBefore         string
		StreamedBeforeStop int
		ChatStatus         string
		Dimensions, Labels int
		Loaded             []string
		KeyModels          int
		KeyStored          bool
		KeyLoaded          string
		KeyGPUs            []string
		KeyVulkan          string
		Screenshots        []string
	}
	if err := json.Unmarshal([]byte(raw), &out); err != nil {
		t.Fatalf("ui.mjs output %q: %v", raw, err)
	}
	t.Logf("page saw: %d models, disk %d B, %d backends, pull %v, slow pull cancelled at %s, %d chunks before Stop, %d dimensions, %d labels, loaded %q",
		len(out.Models), out.DiskTotal, len(out.Backends), out.PullFiles, out.SlowBefore, out.StreamedBeforeStop, out.Dimensions, out.Labels, out.Loaded)
	if out.CSP != ui.ContentSecurityPolicy {
		t.Errorf("the page came with Content-Security-Policy %q", out.CSP)
	}
	if len(out.Models) != 4 || out.DiskTotal <= 0 {
		t.Errorf("the page listed %+v (disk %d), want t/long, t/embed, t/classify, t/spare", out.Models, out.DiskTotal)
	}
	if !strings.Contains(out.ConfirmText, "t/spare") {
		t.Errorf("the delete confirmation says %q", out.ConfirmText)
	}
	if len(out.Backends) != 4 {
		t.Errorf("the probe panel shows %+v, want the 4 backends", out.Backends)
	}
	for _, b := range out.Backends {
		if b.Usable == "no" && b.Reason == "" {
			t.Errorf("backend %s is not usable and the panel does not say why", b.Kind)
		}
	}
	if out.ChatStatus != "stopped" || out.StreamedBeforeStop < 5 {
		t.Errorf("chat: %d chunks, then %q", out.StreamedBeforeStop, out.ChatStatus)
	}
	if out.Dimensions <= 0 || out.Labels <= 0 {
		t.Errorf("embed gave %d dimensions, classify %d labels", out.Dimensions, out.Labels)
	}
	if !slices.ContainsFunc(out.Loaded, func(l string) bool { return strings.HasPrefix(l, "t/long: cpu · for ") }) {
		t.Errorf("the page shows as loaded %q, want t/long on the CPU with its time loaded", out.Loaded)
	}
	if out.KeyModels != 2 || !out.KeyStored {
		t.Errorf("with an API key the page listed %d models (key kept: %v)", out.KeyModels, out.KeyStored)
	}
	if !strings.HasPrefix(out.KeyLoaded, "vulkan:0 (100% GPU) · for ") {
		t.Errorf("the model loaded on the GPU shows as %q", out.KeyLoaded)
	}
	if len(out.KeyGPUs) != 1 || !strings.Contains(out.KeyGPUs[0], "llvmpipe") || out.KeyVulkan != "yes" {
		t.Errorf("the GPU daemon's probe panel shows GPUs %q, vulkan usable %q", out.KeyGPUs, out.KeyVulkan)
	}
	for _, p := range out.Screenshots {
		if st, err := os.Stat(p); err != nil || st.Size() == 0 {
			t.Errorf("screenshot %s: %v", p, err)
		}
	}
	if len(out.Screenshots) < 6 {
		t.Errorf("%d screenshots: %v", len(out.Screenshots), out.Screenshots)
	}

	// What the daemon did, seen from outside the page.
	poll(t, "the daemon to stop downloading the cancelled pull", func() bool { return hub.slowActive.Load() == 0 })
	waitMetric(t, base, `modeld_generations_cancelled_total{model="t/long"} 1`)
	waitMetric(t, base, `vllm:num_requests_running{model_name="t/long"} 0`)
	res, err := http.Get(base + "/v1/models")
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	var list struct{ Data []struct{ ID string } }
	if err := json.NewDecoder(res.Body).Decode(&list); err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, m := range list.Data {
		ids = append(ids, m.ID)
	}
	slices.Sort(ids)
	if want := out.Pulled + ",t/classify,t/embed,t/long"; !strings.HasPrefix(out.Pulled, "org/tiny") || strings.Join(ids, ",") != want {
		t.Errorf("models after the page's delete and pulls: %v, want %s", ids, want)
	}
}
