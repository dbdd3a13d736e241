package main

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"image"
	"image/color"
	"image/png"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/modeld/modeld/internal/ggufgen"
	"github.com/modeld/modeld/internal/imagetest"
)

// visionPNGBase64 is a generated w×h PNG, base64.
func visionPNGBase64(t *testing.T, w, h int) string {
	t.Helper()
	m := image.NewNRGBA(image.Rect(0, 0, w, h))
	for y := 0; y < h; y++ {
		for x := 0; x < w; x++ {
			m.Set(x, y, color.NRGBA{uint8(x * 7), uint8(y * 5), 90, 255})
		}
	}
	var buf bytes.Buffer
	if err := png.Encode(&buf, m); err != nil {
		t.Fatal(err)
	}
	return base64.StdEncoding.EncodeToString(buf.Bytes())
}

// postRaw posts body to url and returns the status and the answer.
func postRaw(t *testing.T, url, body string) (int, []byte) {
	t.Helper()
	res, err := http.Post(url, "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	if err != nil {
		t.Fatal(err)
	}
	return res.StatusCode, b
}

// promptTokensOf reads the prompt's token count from a dialect's answer.
func promptTokensOf(t *testing.T, path string, body []byte) int {
	t.Helper()
	var v struct {
		Usage struct {
			PromptTokens int `json:"prompt_tokens"`
			InputTokens  int `json:"input_tokens"`
		} `json:"usage"`
		PromptEvalCount int `json:"prompt_eval_count"`
	}
	if err := json.Unmarshal(body, &v); err != nil {
		t.Fatalf("%s: %v in %s", path, err, body)
	}
	switch {
	case strings.HasPrefix(path, "/api/"):
		return v.PromptEvalCount
	case path == "/v1/chat/completions":
		return v.Usage.PromptTokens
	}
	return v.Usage.InputTokens
}

// TestVisionChatAgainstDaemon: a tiny chat model imported with its
// generated projector reads a PNG in each dialect's own shape, through the
// real multimodal library in the runner; the prompt counts the image as
// the projector's tokens, the same in usage, /v1/tokenize and count_tokens;
// a broken image is a 400 and the model answers after it; the same model
// imported without its projector refuses images in each dialect's shape.
func TestVisionChatAgainstDaemon(t *testing.T) {
	dir := t.TempDir()
	model, proj := filepath.Join(dir, "vision.gguf"), filepath.Join(dir, "vision-mmproj.gguf")
	if err := ggufgen.WriteFile(model, ggufgen.Tiny(ggufgen.SPM)); err != nil {
		t.Fatal(err)
	}
	projector := ggufgen.TinyProjector()
	if err := ggufgen.WriteProjectorFile(proj, projector); err != nil {
		t.Fatal(err)
	}
	home := t.TempDir()
	env := map[string]string{"MODELD_HOME": home}
	if out, err := runCLI(t, env, "import", model, "--name", "t/vision", "--mmproj", proj); err != nil {
		t.Fatalf("import with projector: %v\n%s", err, out)
	}
	if out, err := runCLI(t, env, "import", model, "--name", "t/text"); err != nil {
		t.Fatalf("import: %v\n%s", err, out)
	}
	_, base, logs := startDaemon(t, home, "--chat-slots", "1")
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("daemon log:\n%s", logs)
		}
	})
	// The model lists image input; the one without its projector does not.
	for id, want := range map[string]bool{"t/vision": true, "t/text": false} {
		res, err := http.Get(base + "/v1/models/" + id)
		if err != nil {
			t.Fatal(err)
		}
		var obj struct {
			InputModalities []string `json:"input_modalities"`
		}
		err = json.NewDecoder(res.Body).Decode(&obj)
		res.Body.Close()
		if got := slices.Contains(obj.InputModalities, "image"); err != nil || got != want {
			t.Errorf("%s: input_modalities %v (%v), want image %v", id, obj.InputModalities, err, want)
		}
		var show struct{ Capabilities []string }
		postJSONTo(t, base+"/api/show", map[string]string{"model": id}, &show)
		if got := slices.Contains(show.Capabilities, "vision"); got != want {
			t.Errorf("%s: /api/show capabilities %v, want vision %v", id, show.Capabilities, want)
		}
	}
	b64 := visionPNGBase64(t, 40, 24)
	url := "data:image/png;base64," + b64
	requests := func(m string) []struct{ name, path, body string } {
		return []struct{ name, path, body string }{
			{"openai", "/v1/chat/completions", `{"model":"` + m + `","max_tokens":4,"temperature":0,"messages":[{"role":"user","content":[{"type":"text","text":"what is it?"},{"type":"image_url","image_url":{"url":"` + url + `"}}]}]}`},
			{"anthropic", "/v1/messages", `{"model":"` + m + `","max_tokens":4,"temperature":0,"messages":[{"role":"user","content":[{"type":"image","source":{"type":"base64","media_type":"image/png","data":"` + b64 + `"}},{"type":"text","text":"what is it?"}]}]}`},
			{"anthropic tool_result", "/v1/messages", `{"model":"` + m + `","max_tokens":4,"temperature":0,"messages":[{"role":"user","content":"read it"},{"role":"assistant","content":[{"type":"tool_use","id":"t1","name":"read","input":{}}]},{"role":"user","content":[{"type":"tool_result","tool_use_id":"t1","content":[{"type":"image","source":{"type":"base64","media_type":"image/png","data":"` + b64 + `"}}]}]}]}`},
			{"responses", "/v1/responses", `{"model":"` + m + `","max_output_tokens":4,"temperature":0,"input":[{"role":"user","content":[{"type":"input_text","text":"what is it?"},{"type":"input_image","image_url":"` + url + `"}]}]}`},
			{"responses function_call_output", "/v1/responses", `{"model":"` + m + `","max_output_tokens":4,"temperature":0,"input":[{"role":"user","content":"look"},{"type":"function_call","call_id":"c1","name":"view_image","arguments":"{}"},{"type":"function_call_output","call_id":"c1","output":[{"type":"input_image","image_url":"` + url + `"}]}]}`},
			{"ollama chat", "/api/chat", `{"model":"` + m + `","stream":false,"options":{"num_predict":4,"temperature":0},"messages":[{"role":"user","content":"what is it?","images":["` + b64 + `"]}]}`},
			{"ollama generate", "/api/generate", `{"model":"` + m + `","stream":false,"options":{"num_predict":4,"temperature":0},"prompt":"what is it?","images":["` + b64 + `"]}`},
		}
	}
	for _, r := range requests("t/vision") {
		status, body := postRaw(t, base+r.path, r.body)
		if status != 200 {
			t.Fatalf("%s: %d %s", r.name, status, body)
		}
		if n := promptTokensOf(t, r.path, body); n <= projector.ImageTokens() {
			t.Errorf("%s: %d prompt tokens, want more than the image's %d", r.name, n, projector.ImageTokens())
		}
	}
	// Exact counts: the image is the projector's tokens, in usage, tokenize
	// and count_tokens alike.
	var with, without struct{ Count int }
	postJSONTo(t, base+"/v1/tokenize", json.RawMessage(`{"model":"t/vision","messages":[{"role":"user","content":[{"type":"text","text":"what is it?"},{"type":"image_url","image_url":{"url":"`+url+`"}}]}]}`), &with)
	postJSONTo(t, base+"/v1/tokenize", json.RawMessage(`{"model":"t/vision","messages":[{"role":"user","content":[{"type":"text","text":"what is it?"}]}]}`), &without)
	if with.Count-without.Count != projector.ImageTokens() {
		t.Errorf("tokenize: %d with the image, %d without; want a difference of %d", with.Count, without.Count, projector.ImageTokens())
	}
	_, body := postRaw(t, base+"/v1/chat/completions", requests("t/vision")[0].body)
	if n := promptTokensOf(t, "/v1/chat/completions", body); n != with.Count {
		t.Errorf("usage.prompt_tokens %d, tokenize %d", n, with.Count)
	}
	var counted struct {
		InputTokens int `json:"input_tokens"`
	}
	postJSONTo(t, base+"/v1/messages/count_tokens", json.RawMessage(`{"model":"t/vision","messages":[{"role":"user","content":[{"type":"image","source":{"type":"base64","media_type":"image/png","data":"`+b64+`"}},{"type":"text","text":"what is it?"}]}]}`), &counted)
	_, body = postRaw(t, base+"/v1/messages", requests("t/vision")[1].body)
	if n := promptTokensOf(t, "/v1/messages", body); n != counted.InputTokens {
		t.Errorf("Messages usage.input_tokens %d, count_tokens %d", n, counted.InputTokens)
	}
	// A WebP (lossless, written here) reads as the PNG does: the same tokens.
	webp := base64.StdEncoding.EncodeToString(imagetest.WebP(40, 24, color.NRGBA{10, 20, 30, 255}, color.NRGBA{10, 200, 30, 255}, func(x, y int) bool { return x > y }))
	status, body := postRaw(t, base+"/v1/chat/completions", strings.Replace(requests("t/vision")[0].body, "data:image/png;base64,"+b64, "data:image/webp;base64,"+webp, 1))
	if status != 200 || promptTokensOf(t, "/v1/chat/completions", body) != with.Count {
		t.Errorf("webp: %d %s; want %d prompt tokens", status, body, with.Count)
	}
	// A broken image is a 400, and the model still answers.
	broken := strings.Replace(requests("t/vision")[0].body, b64, b64[:60], 1)
	if status, body := postRaw(t, base+"/v1/chat/completions", broken); status != 400 || !strings.Contains(string(body), "invalid_image") {
		t.Errorf("truncated image: %d %s", status, body)
	}
	if status, body := postRaw(t, base+"/v1/chat/completions", requests("t/vision")[0].body); status != 200 {
		t.Errorf("after a broken image: %d %s", status, body)
	}
	// The official clients send the image their own way.
	var sdk map[string]int
	if err := json.Unmarshal([]byte(runClient(t, base, "vision.mjs", map[string]string{"MODEL": "t/vision", "IMAGE": b64})), &sdk); err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"openai", "responses", "anthropic", "anthropic_count", "ollama"} {
		if sdk[k] <= projector.ImageTokens() {
			t.Errorf("%s client: %d prompt tokens, want more than the image's %d (%v)", k, sdk[k], projector.ImageTokens(), sdk)
		}
	}
	t.Logf("prompt tokens by client: %v", sdk)
	if sdk["openai"] != with.Count || sdk["anthropic"] != sdk["anthropic_count"] {
		t.Errorf("client counts %v; tokenize says %d", sdk, with.Count)
	}
	// Without its projector the model refuses images, in each dialect's shape.
	for _, r := range requests("t/text") {
		status, body := postRaw(t, base+r.path, r.body)
		if status != 400 || !strings.Contains(string(body), "does not accept image input") {
			t.Errorf("%s on a text-only model: %d %s", r.name, status, body)
		}
		var shape map[string]any
		_ = json.Unmarshal(body, &shape)
		switch {
		case strings.HasPrefix(r.path, "/api/"):
			if _, ok := shape["error"].(string); !ok {
				t.Errorf("%s: not Ollama's error shape: %s", r.name, body)
			}
		case r.path == "/v1/messages":
			if shape["type"] != "error" {
				t.Errorf("%s: not Anthropic's error shape: %s", r.name, body)
			}
		default:
			if e, ok := shape["error"].(map[string]any); !ok || e["code"] != "image_input_unsupported" {
				t.Errorf("%s: not OpenAI's error shape with the code: %s", r.name, body)
			}
		}
	}
}

// TestClaudeCodeImageAgainstDaemon: Claude Code, unmodified, sends a
// screenshot pasted into its prompt (a stream-json user message with an
// image block, as its SDK mode takes one) to a vision model: the daemon
// reads the image (a 200 whose prompt counts it) and Claude Code prints the
// answer.
func TestClaudeCodeImageAgainstDaemon(t *testing.T) {
	bin := agentBin(t, "claude")
	base, logs := visionAgentDaemon(t)
	rec := newRecorder(t, base)
	ag, _ := findAgent("claude")
	_, env, _ := agentHome(t, ag, launchTarget{Base: rec.URL, Model: "t/vision", Context: 65536, Vision: true})
	b64 := visionPNGBase64(t, 64, 48)
	line, err := json.Marshal(map[string]any{"type": "user", "message": map[string]any{"role": "user", "content": []map[string]any{
		{"type": "image", "source": map[string]string{"type": "base64", "media_type": "image/png", "data": b64}},
		{"type": "text", "text": "What is in this screenshot?"},
	}}})
	if err != nil {
		t.Fatal(err)
	}
	run := runAgentStdin(t, t.TempDir(), env, bin, string(line)+"\n", "-p", "--input-format", "stream-json", "--output-format", "stream-json", "--verbose", "--model", "t/vision")
	if !strings.Contains(run.Stdout, `"type":"result"`) || strings.Contains(run.Stdout, `"is_error":true`) {
		t.Fatalf("Claude Code did not finish the turn:\n%s\nstderr:\n%s", run.Stdout, run.Stderr)
	}
	checkImageTurn(t, rec, logs, "/v1/messages", b64)
}

// visionAgentDaemon starts a daemon serving t/vision (a tiny chat model
// with its projector, and a context an agent's prompt fits in) under the
// aliases the agents' own model names use; its log is returned.
func visionAgentDaemon(t *testing.T) (base string, logs *syncBuffer) {
	t.Helper()
	dir := t.TempDir()
	model, proj := filepath.Join(dir, "vision.gguf"), filepath.Join(dir, "vision-mmproj.gguf")
	opts := ggufgen.Tiny(ggufgen.SPM)
	opts.Context = 65536  // room for an agent's system prompt and tools
	opts.EndsTurns = true // sampled answers end, as an agent's turn must (else it runs to max_tokens 32000)
	if err := ggufgen.WriteFile(model, opts); err != nil {
		t.Fatal(err)
	}
	if err := ggufgen.WriteProjectorFile(proj, ggufgen.TinyProjector()); err != nil {
		t.Fatal(err)
	}
	home := t.TempDir()
	if out, err := runCLI(t, map[string]string{"MODELD_HOME": home}, "import", model, "--name", "t/vision", "--mmproj", proj); err != nil {
		t.Fatalf("import: %v\n%s", err, out)
	}
	logs = &syncBuffer{}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("daemon log:\n%s", logs)
		}
	})
	_, base = startDaemonLines(t, home, func(line string, _ bool) { logs.Write([]byte(line + "\n")) },
		"--chat-slots", "2", "--context-size", "65536", "--model-aliases", "claude-*=t/vision,gpt-*=t/vision")
	return base, logs
}

// checkImageTurn: some request to route carried the image b64, and every
// request to route was answered 200, one at least with a prompt longer
// than the image's tokens.
func checkImageTurn(t *testing.T, rec *recorder, logs *syncBuffer, route, b64 string) {
	t.Helper()
	sent := false
	for _, r := range rec.since(0) {
		if r.Path == route && bytes.Contains(r.Raw, []byte(b64)) {
			sent = true
		}
	}
	if !sent {
		t.Fatalf("no %s request carried the image", route)
	}
	answered := 0
	for _, l := range agentAccessLines(t, logs, 0) {
		if l.Route == route && l.Status != 200 {
			t.Errorf("a %s request answered %d", route, l.Status)
		}
		if l.Route == route && l.Status == 200 && l.Prompt > ggufgen.TinyProjector().ImageTokens() {
			answered++
		}
	}
	if answered == 0 {
		t.Errorf("no %s request was answered", route)
	}
}

// TestCodexImageAgainstDaemon: Codex, unmodified, attaches an image file
// (exec -i) for a model whose catalog entry lists image input (modeld
// launch's settings): the Responses request carries it as input_image and
// the daemon reads it.
func TestCodexImageAgainstDaemon(t *testing.T) {
	bin := agentBin(t, "codex")
	base, logs := visionAgentDaemon(t)
	rec := newRecorder(t, base)
	ag, _ := findAgent("codex")
	_, env, s := agentHome(t, ag, launchTarget{Base: rec.URL, Model: "t/vision", Context: 65536, Vision: true})
	work := t.TempDir()
	b64 := visionPNGBase64(t, 64, 48)
	raw, err := base64.StdEncoding.DecodeString(b64)
	if err != nil {
		t.Fatal(err)
	}
	pic := filepath.Join(work, "screenshot.png")
	if err := os.WriteFile(pic, raw, 0o644); err != nil {
		t.Fatal(err)
	}
	args := append(append([]string(nil), s.Args...), "exec", "--skip-git-repo-check", "What is in this screenshot?", "-i", pic)
	run := runAgent(t, work, env, bin, args...)
	if strings.TrimSpace(run.Stdout) == "" {
		t.Fatalf("codex printed no answer\nstderr:\n%s", run.Stderr)
	}
	checkImageTurn(t, rec, logs, "/v1/responses", b64)
}
