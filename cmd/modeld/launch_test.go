package main

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// A user's opencode config with its own formatting, a provider of its own
// and a mode of its own: --undo must give these exact bytes back.
const userOpencodeConfig = "{\n\t\"theme\": \"tokyonight\",   \"provider\": {\"mine\": {\"npm\": \"x\"}}\n}\n"

func TestLaunchWritesSettingsAndUndoRestoresThemByteForByte(t *testing.T) {
	home := t.TempDir()
	a := &app{cfg: Config{Home: t.TempDir()}, stdout: io.Discard, stderr: io.Discard}
	cfgPath := filepath.Join(home, ".config", "opencode", "opencode.json")
	if err := os.MkdirAll(filepath.Dir(cfgPath), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(cfgPath, []byte(userOpencodeConfig), 0o640); err != nil {
		t.Fatal(err)
	}
	codexUser := filepath.Join(home, ".codex", "config.toml")
	if err := os.MkdirAll(filepath.Dir(codexUser), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(codexUser, []byte("model = \"gpt-5.5\"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	target := launchTarget{Base: "http://127.0.0.1:9", Model: "t/agent", Context: 32768, Home: home, getenv: func(string) string { return "" }}

	for _, name := range []string{"opencode", "codex"} {
		ag, err := findAgent(name)
		if err != nil {
			t.Fatal(err)
		}
		s, err := ag.settings(target)
		if err != nil {
			t.Fatal(err)
		}
		for range 2 { // a second launch keeps the first backup
			if _, err := a.applyLaunch(ag, s.Files); err != nil {
				t.Fatalf("%s: %v", name, err)
			}
		}
	}

	var oc map[string]any
	b, err := os.ReadFile(cfgPath)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, &oc); err != nil {
		t.Fatalf("opencode config after launch: %v\n%s", err, b)
	}
	providers, _ := oc["provider"].(map[string]any)
	if oc["theme"] != "tokyonight" || providers["mine"] == nil || oc["model"] != "modeld/t/agent" {
		t.Fatalf("opencode config lost the user's settings or lacks the model: %s", b)
	}
	md, _ := providers["modeld"].(map[string]any)
	opts, _ := md["options"].(map[string]any)
	if opts["baseURL"] != "http://127.0.0.1:9/v1" {
		t.Fatalf("modeld provider %v", md)
	}
	if bk, err := os.ReadFile(cfgPath + backupSuffix); err != nil || string(bk) != userOpencodeConfig {
		t.Fatalf("backup %q, %v; want the user's bytes", bk, err)
	}
	profile, err := os.ReadFile(filepath.Join(home, ".codex", "modeld.config.toml"))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{`model = "t/agent"`, `base_url = "http://127.0.0.1:9/v1"`, `wire_api = "responses"`, "model_context_window = 32768"} {
		if !bytes.Contains(profile, []byte(want)) {
			t.Errorf("codex profile lacks %s:\n%s", want, profile)
		}
	}
	var catalog struct {
		Models []struct {
			Slug          string   `json:"slug"`
			ContextWindow int      `json:"context_window"`
			Modalities    []string `json:"input_modalities"`
		} `json:"models"`
	}
	if b, err := os.ReadFile(filepath.Join(home, ".codex", "modeld-models.json")); err != nil || json.Unmarshal(b, &catalog) != nil ||
		len(catalog.Models) != 1 || catalog.Models[0].Slug != "t/agent" || catalog.Models[0].ContextWindow != 32768 || strings.Join(catalog.Models[0].Modalities, ",") != "text" {
		t.Fatalf("codex catalog %+v (%v)", catalog, err)
	}

	for _, name := range []string{"opencode", "codex"} {
		ag, _ := findAgent(name)
		if err := a.undoLaunch(ag); err != nil {
			t.Fatalf("undo %s: %v", name, err)
		}
		if err := a.undoLaunch(ag); err == nil || !strings.Contains(err.Error(), "nothing to undo") {
			t.Fatalf("a second undo of %s: %v, want nothing to undo", name, err)
		}
	}
	b, err = os.ReadFile(cfgPath)
	if err != nil || string(b) != userOpencodeConfig {
		t.Fatalf("opencode config after undo: %q, %v; want the user's bytes", b, err)
	}
	if st, err := os.Stat(cfgPath); err != nil || st.Mode().Perm() != 0o640 {
		t.Fatalf("opencode config mode after undo: %v, %v; want 0640", st.Mode(), err)
	}
	for _, gone := range []string{cfgPath + backupSuffix, filepath.Join(home, ".codex", "modeld.config.toml"), filepath.Join(home, ".codex", "modeld-models.json")} {
		if _, err := os.Stat(gone); !os.IsNotExist(err) {
			t.Errorf("%s still there after undo (%v)", gone, err)
		}
	}
	if b, err := os.ReadFile(codexUser); err != nil || string(b) != "model = \"gpt-5.5\"\n" {
		t.Fatalf("the user's codex config.toml changed: %q, %v", b, err)
	}
}

func TestLaunchClaudeExportsItsEnvironment(t *testing.T) {
	s, err := claudeSettings(launchTarget{Base: "http://127.0.0.1:9", Key: "k1", Model: "t/agent", Context: 32768})
	if err != nil {
		t.Fatal(err)
	}
	get := envLookup(s.Env)
	for k, want := range map[string]string{
		"ANTHROPIC_BASE_URL": "http://127.0.0.1:9", "ANTHROPIC_AUTH_TOKEN": "k1", "ANTHROPIC_MODEL": "t/agent",
		"ANTHROPIC_DEFAULT_HAIKU_MODEL": "t/agent", "ANTHROPIC_DEFAULT_SONNET_MODEL": "t/agent", "ANTHROPIC_SMALL_FAST_MODEL": "t/agent",
		"CLAUDE_CODE_MAX_CONTEXT_TOKENS": "32768", "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1", "DISABLE_AUTOUPDATER": "1", "DISABLE_TELEMETRY": "1",
	} {
		if got := get(k); got != want {
			t.Errorf("%s = %q, want %q", k, got, want)
		}
	}
	if len(s.Files) != 0 {
		t.Errorf("claude settings write files: %v", s.Files)
	}
}

// TestLaunchAgainstDaemonWithAliases runs modeld launch --config-only
// against a daemon with model aliases: the model is found by its alias, the
// settings name it, and /v1/models and every dialect answer for the alias.
func TestLaunchAgainstDaemonWithAliases(t *testing.T) {
	home, base := realDaemon(t, []realModel{qwenModel}, "--context-size", "1024", "--model-aliases", "claude-sonnet-*=t/qwen,gpt-5.5=t/qwen")
	user := t.TempDir()
	env := map[string]string{"MODELD_HOME": home, "HOME": user}

	out, err := runCLI(t, env, "launch", "codex", "gpt-5.5", "--config-only", "--", "exec", "say hi")
	if err != nil {
		t.Fatalf("launch codex: %v\n%s", err, out)
	}
	if !strings.Contains(out, "export MODELD_API_KEY=modeld") || !strings.Contains(out, "codex -p modeld exec 'say hi'") {
		t.Fatalf("launch codex --config-only printed:\n%s", out)
	}
	profile, err := os.ReadFile(filepath.Join(user, ".codex", "modeld.config.toml"))
	if err != nil || !bytes.Contains(profile, []byte(`model = "gpt-5.5"`)) || !bytes.Contains(profile, []byte("model_context_window = 1024")) ||
		!bytes.Contains(profile, []byte(`base_url = "`+base+`/v1"`)) {
		t.Fatalf("codex profile %s (%v)", profile, err)
	}
	if out, err := runCLI(t, env, "launch", "codex", "--undo"); err != nil || !strings.Contains(out, "removed") {
		t.Fatalf("launch codex --undo: %v\n%s", err, out)
	}
	if _, err := os.Stat(filepath.Join(user, ".codex", "modeld.config.toml")); !os.IsNotExist(err) {
		t.Fatalf("profile still there after --undo: %v", err)
	}
	if out, err := runCLI(t, env, "launch", "opencode", "no/such", "--config-only"); err == nil || !strings.Contains(err.Error(), "no chat model \"no/such\"") {
		t.Fatalf("launch of an unknown model: %v\n%s", err, out)
	}

	var list struct {
		Data []struct {
			ID            string   `json:"id"`
			ContextLength int      `json:"context_length"`
			ContextWindow int      `json:"context_window"`
			Aliases       []string `json:"aliases"`
		} `json:"data"`
	}
	getJSON(t, base+"/v1/models", &list)
	if len(list.Data) != 1 || list.Data[0].ContextWindow != 1024 || list.Data[0].ContextLength != 1024 ||
		strings.Join(list.Data[0].Aliases, ",") != "claude-sonnet-*,gpt-5.5" {
		t.Fatalf("/v1/models = %+v", list)
	}
	var one struct{ ID string }
	getJSON(t, base+"/v1/models/claude-sonnet-4-5", &one)
	if one.ID != "t/qwen" {
		t.Fatalf("GET /v1/models/claude-sonnet-4-5 = %+v, want t/qwen", one)
	}
	if ls, err := runCLI(t, map[string]string{"MODELD_HOME": home, "MODELD_MODEL_ALIASES": "gpt-5.5=t/qwen"}, "ls"); err != nil || !strings.Contains(ls, "gpt-5.5  t/qwen") {
		t.Fatalf("ls with aliases: %v\n%s", err, ls)
	}

	// Every dialect finds the model by an alias.
	for _, c := range []struct{ path, body string }{
		{"/v1/chat/completions", `{"model":"gpt-5.5","max_tokens":2,"messages":[{"role":"user","content":"hi"}]}`},
		{"/v1/messages", `{"model":"claude-sonnet-4-5-20250929","max_tokens":2,"messages":[{"role":"user","content":"hi"}]}`},
		{"/v1/responses", `{"model":"gpt-5.5","max_output_tokens":2,"input":"hi"}`},
		{"/api/chat", `{"model":"claude-sonnet-4","stream":false,"options":{"num_predict":2},"messages":[{"role":"user","content":"hi"}]}`},
	} {
		res, err := http.Post(base+c.path, "application/json", strings.NewReader(c.body))
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(res.Body)
		res.Body.Close()
		if res.StatusCode != http.StatusOK {
			t.Errorf("%s with an alias: %d %s", c.path, res.StatusCode, b)
		}
	}
	res, err := http.Post(base+"/v1/chat/completions", "application/json", strings.NewReader(`{"model":"claude-opus-4","max_tokens":2,"messages":[{"role":"user","content":"hi"}]}`))
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if res.StatusCode != http.StatusNotFound {
		t.Errorf("a name no alias matches: %d, want 404", res.StatusCode)
	}
}

func TestLaunchEnvReplacesTheUsersVariables(t *testing.T) {
	got := mergeEnv([]string{"PATH=/bin", "ANTHROPIC_BASE_URL=https://elsewhere", "ANTHROPIC_MODEL=x"}, []string{"ANTHROPIC_BASE_URL=http://127.0.0.1:9", "ANTHROPIC_MODEL=t/agent"})
	if strings.Join(got, " ") != "PATH=/bin ANTHROPIC_BASE_URL=http://127.0.0.1:9 ANTHROPIC_MODEL=t/agent" {
		t.Fatalf("mergeEnv = %v", got)
	}
}

func TestModelAliasesSetting(t *testing.T) {
	as, err := parseAliases("claude-sonnet-*=t/qwen, gpt-5.5=t/qwen,*=t/small")
	if err != nil {
		t.Fatal(err)
	}
	for name, want := range map[string]string{"claude-sonnet-4-5-20250929": "t/qwen", "gpt-5.5": "t/qwen", "gpt-5.4": "t/small"} {
		if got, ok := as.match(name); !ok || got != want {
			t.Errorf("match(%q) = %q, %v; want %q", name, got, ok, want)
		}
	}
	for _, bad := range []string{"claude", "=t/qwen", "[=t/qwen", "x=bad id!"} {
		if _, err := parseAliases(bad); err == nil {
			t.Errorf("parseAliases(%q): no error", bad)
		}
	}
}

func getJSON(t *testing.T, url string, out any) {
	t.Helper()
	res, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	if res.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: %d %s", url, res.StatusCode, b)
	}
	if err := json.Unmarshal(b, out); err != nil {
		t.Fatalf("GET %s: %v in %s", url, err, b)
	}
}
