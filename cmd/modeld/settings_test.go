package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/modeld/modeld/api"
	"github.com/modeld/modeld/backends"
)

// The settings table is the one description of the configuration: these
// tests check that /v1/system, serve --help and the README are derived
// from it and show every setting.

var updateREADME = flag.Bool("update-readme", false, "rewrite the README's settings table from the settings")

// Every setting appears in /v1/system's config with its source, and no
// secret's value appears anywhere in the answer.
func TestSystemConfigShowsEverySetting(t *testing.T) {
	home := t.TempDir()
	const apiKey, hfToken = "sk-sekrit-api-key-8c1f", "hf_sekrit_token_93ab"
	if err := os.WriteFile(filepath.Join(home, "config.json"), []byte(`{"keep_alive": "90s", "origins": "http://a.test"}`), 0o644); err != nil {
		t.Fatal(err)
	}
	env := map[string]string{"MODELD_HOME": home, "MODELD_CHAT_SLOTS": "2", "MODELD_API_KEY": apiKey, "HF_TOKEN": hfToken}
	cfg, err := loadConfig(flags(t, "--queue-size", "5"), envOf(env))
	if err != nil {
		t.Fatal(err)
	}
	srv := api.New(api.Options{Version: "test", Libs: backends.Libs{Root: t.TempDir()}, Settings: cfg.public(), APIKey: apiKey})
	req := httptest.NewRequest("GET", "http://localhost/v1/system", nil)
	req.Header.Set("Authorization", "Bearer "+apiKey)
	w := httptest.NewRecorder()
	srv.Handler().ServeHTTP(w, req)
	body := w.Body.String()
	var sys struct {
		Config map[string]map[string]any `json:"config"`
	}
	if err := json.Unmarshal(w.Body.Bytes(), &sys); err != nil || w.Code != 200 {
		t.Fatalf("GET /v1/system: %d %v %s", w.Code, err, body)
	}
	for _, secret := range []string{apiKey, hfToken} {
		if strings.Contains(body, secret) {
			t.Errorf("/v1/system shows the secret %q: %s", secret, body)
		}
	}
	want := map[string]string{"queue_size": "flag", "chat_slots": "environment", "keep_alive": "file", "origins": "file",
		"max_loaded": "default", "api_key": "environment", "hf_token": "environment"}
	for _, s := range settings {
		got, ok := sys.Config[s.key()]
		if !ok {
			t.Errorf("setting %s is missing from /v1/system's config", s.name)
			continue
		}
		src, _ := got["source"].(string)
		switch src {
		case sourceFlag, sourceEnv, sourceFile, sourceDefault, sourceKeyFile:
		default:
			t.Errorf("%s: source %q is not one of flag, environment, file, default", s.name, src)
		}
		if w, ok := want[s.key()]; ok && src != w {
			t.Errorf("%s: source %q, want %q", s.name, src, w)
		}
		_, hasValue := got["value"]
		_, hasSet := got["set"]
		if s.secret && (hasValue || !hasSet) || !s.secret && (!hasValue || hasSet) {
			t.Errorf("%s (secret %v) shown as %v", s.name, s.secret, got)
		}
	}
	if len(sys.Config) != len(settings) {
		t.Errorf("/v1/system shows %d settings, the table has %d", len(sys.Config), len(settings))
	}
	if sys.Config["api_key"]["set"] != true || sys.Config["hf_token"]["set"] != true || sys.Config["keep_alive"]["value"] != "1m30s" {
		t.Errorf("api_key %v, hf_token %v, keep_alive %v", sys.Config["api_key"], sys.Config["hf_token"], sys.Config["keep_alive"])
	}
}

// A key read from --api-key-file says so, and is not shown either.
func TestSystemConfigKeyFile(t *testing.T) {
	home := t.TempDir()
	keyFile := filepath.Join(home, "key")
	if err := os.WriteFile(keyFile, []byte("sk-from-the-file-77\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg, err := loadConfig(flags(t, "--api-key-file", keyFile), envOf(map[string]string{"MODELD_HOME": home}))
	if err != nil {
		t.Fatal(err)
	}
	b, err := json.Marshal(cfg.public())
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(b), "sk-from-the-file-77") || !strings.Contains(string(b), `"api_key":{"set":true,"source":"api_key_file"}`) {
		t.Errorf("config = %s", b)
	}
}

// serve --help lists every setting with its environment variable and default.
func TestServeHelpListsEverySetting(t *testing.T) {
	out, err := runCLI(t, map[string]string{"MODELD_HOME": t.TempDir()}, "serve", "--help")
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range settings {
		want := fmt.Sprintf("(env %s, default %q)", s.env(), s.defaultText())
		if !s.hasFlag() {
			want = s.env() + ": " + s.help
		} else if !strings.Contains(out, "--"+s.name+" ") {
			t.Errorf("serve --help lacks --%s", s.name)
		}
		if !strings.Contains(out, want) {
			t.Errorf("serve --help lacks %q", want)
		}
	}
}

// The README's table of settings is the settings table, written out.
func TestREADMESettingsTable(t *testing.T) {
	const path = "../../README.md"
	const begin, end = "<!-- settings table: generated from cmd/modeld/config.go -->\n", "<!-- end of the settings table -->\n"
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	readme := string(b)
	i, j := strings.Index(readme, begin), strings.Index(readme, end)
	if i < 0 || j < i {
		t.Fatalf("README.md lacks the markers %q and %q", begin, end)
	}
	want := settingsMarkdown()
	if got := readme[i+len(begin) : j]; got != want {
		if *updateREADME {
			if err := os.WriteFile(path, []byte(readme[:i+len(begin)]+want+readme[j:]), 0o644); err != nil {
				t.Fatal(err)
			}
			return
		}
		t.Errorf("README.md's settings table differs from the settings; run go test ./cmd/modeld -run TestREADMESettingsTable -update-readme\n got:\n%s\nwant:\n%s", got, want)
	}
}

// settingsMarkdown is the README's table of the settings.
func settingsMarkdown() string {
	var b strings.Builder
	b.WriteString("| flag | environment | default | meaning |\n|---|---|---|---|\n")
	for _, s := range settings {
		flagCell := "`--" + s.name + "`"
		if !s.hasFlag() {
			flagCell = "—"
		}
		def := "none"
		if d := s.defaultText(); d != "" {
			def = "`" + d + "`"
		}
		fmt.Fprintf(&b, "| %s | `%s` | %s | %s |\n", flagCell, s.env(), def, strings.ReplaceAll(s.help, "|", `\|`))
	}
	return b.String()
}
