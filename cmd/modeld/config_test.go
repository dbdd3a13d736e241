package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/spf13/pflag"
)

func flags(t *testing.T, args ...string) *pflag.FlagSet {
	t.Helper()
	fs := pflag.NewFlagSet("test", pflag.ContinueOnError)
	addFlags(fs, true)
	addFlags(fs, false)
	if err := fs.Parse(args); err != nil {
		t.Fatal(err)
	}
	return fs
}

func envOf(m map[string]string) func(string) string { return func(k string) string { return m[k] } }

func TestConfigDefaults(t *testing.T) {
	home := t.TempDir()
	c, err := loadConfig(flags(t), envOf(map[string]string{"MODELD_HOME": home}))
	if err != nil {
		t.Fatal(err)
	}
	if c.Listen != "127.0.0.1:11435" || c.Home != home || c.LibDir != filepath.Join(home, "lib") {
		t.Fatalf("defaults: %+v", c)
	}
	if c.KeepAlive != 5*time.Minute || c.ChatSlots != 4 || c.MaxLoaded != 3 || c.RAMBudget != 0 {
		t.Fatalf("defaults: %+v", c)
	}
	if strings.Join(c.GPUTasks, ",") != "chat,embed,classify,rerank,image-classify,image-embed" {
		t.Fatalf("gpu tasks = %v", c.GPUTasks)
	}
}

func TestConfigXDGDefaultHome(t *testing.T) {
	t.Setenv("XDG_DATA_HOME", "/xdg")
	if got := defaultHome(); got != "/xdg/modeld" {
		t.Fatalf("home = %s", got)
	}
}

func TestConfigPrecedence(t *testing.T) {
	home := t.TempDir()
	file := `{"keep_alive": "1m", "chat_slots": 2, "queue_size": 7, "ram_budget": "2GiB"}`
	if err := os.WriteFile(filepath.Join(home, "config.json"), []byte(file), 0o644); err != nil {
		t.Fatal(err)
	}
	env := envOf(map[string]string{
		"MODELD_HOME":       home,
		"MODELD_CHAT_SLOTS": "3",
		"MODELD_QUEUE_SIZE": "9",
		"HF_TOKEN":          "secret",
	})
	c, err := loadConfig(flags(t, "--queue-size", "11", "--offline"), env)
	if err != nil {
		t.Fatal(err)
	}
	if c.KeepAlive != time.Minute { // file over default
		t.Errorf("keep-alive = %s, want 1m from the file", c.KeepAlive)
	}
	if c.ChatSlots != 3 { // env over file
		t.Errorf("chat-slots = %d, want 3 from env", c.ChatSlots)
	}
	if c.QueueSize != 11 { // flag over env
		t.Errorf("queue-size = %d, want 11 from the flag", c.QueueSize)
	}
	if c.RAMBudget != 2<<30 || !c.Offline || c.HFToken != "secret" {
		t.Errorf("config = %+v", c)
	}
	pub := c.public()
	for key, want := range map[string]string{"keep_alive": sourceFile, "chat_slots": sourceEnv, "queue_size": sourceFlag,
		"offline": sourceFlag, "ram_budget": sourceFile, "max_loaded": sourceDefault, "hf_token": sourceEnv, "home": sourceEnv} {
		if got := pub[key].Source; got != want {
			t.Errorf("%s: source %q, want %q", key, got, want)
		}
	}
	if set := pub["hf_token"].Set; set == nil || !*set || pub["hf_token"].Value != nil {
		t.Errorf("public config of HF_TOKEN = %+v, want only that it is set", pub["hf_token"])
	}
	if pub["keep_alive"].Value != "1m" || pub["queue_size"].Value != 11 || pub["ram_budget"].Value != int64(2<<30) || pub["max_download"].Value != "auto" {
		t.Errorf("public values: keep_alive %v, queue_size %v, ram_budget %v, max_download %v",
			pub["keep_alive"].Value, pub["queue_size"].Value, pub["ram_budget"].Value, pub["max_download"].Value)
	}
}

func TestConfigInvalidValuesNameTheSetting(t *testing.T) {
	home := t.TempDir()
	cases := []struct {
		args []string
		env  map[string]string
		want string
	}{
		{args: []string{"--listen", "localhost"}, want: "invalid listen (flag --listen)"},
		{args: []string{"--listen", "example.com:80"}, want: "not an IP address"},
		{args: []string{"--listen", "127.0.0.1:99999"}, want: "0-65535"},
		{env: map[string]string{"MODELD_GPU_TASKS": "embed,chatt"}, want: `invalid gpu-tasks (environment MODELD_GPU_TASKS) = "embed,chatt": unknown task "chatt"`},
		{args: []string{"--ram-budget", "-1GB"}, want: "invalid ram-budget"},
		{args: []string{"--ram-budget", "12 parsecs"}, want: "unknown size unit"},
		{args: []string{"--chat-slots", "0"}, want: "invalid chat-slots (flag --chat-slots) = \"0\": must be at least 1"},
		{args: []string{"--load-wait", "-3s"}, want: "must not be negative"},
		{args: []string{"--keep-alive", "soon"}, want: "invalid keep-alive"},
		{args: []string{"--log-level", "loud"}, want: "want one of debug, info, warn, error"},
		{args: []string{"--config", filepath.Join(home, "absent.json")}, want: "config file"},
	}
	for _, tc := range cases {
		env := map[string]string{"MODELD_HOME": home}
		for k, v := range tc.env {
			env[k] = v
		}
		_, err := loadConfig(flags(t, tc.args...), envOf(env))
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%v %v: err = %v, want it to contain %q", tc.args, tc.env, err, tc.want)
		}
	}
}

func TestConfigFileUnknownKey(t *testing.T) {
	home := t.TempDir()
	if err := os.WriteFile(filepath.Join(home, "config.json"), []byte(`{"keepalive": "1m"}`), 0o644); err != nil {
		t.Fatal(err)
	}
	_, err := loadConfig(flags(t), envOf(map[string]string{"MODELD_HOME": home}))
	if err == nil || !strings.Contains(err.Error(), "unknown keys keepalive") {
		t.Fatalf("err = %v", err)
	}
}

// --keep-alive reads what a request's keep_alive reads (internal/duration):
// "10 minutes" is refused, not taken for 10 seconds.
func TestKeepAliveForms(t *testing.T) {
	home := t.TempDir()
	ok := map[string]time.Duration{"5m": 5 * time.Minute, "300": 300 * time.Second, "-1": -time.Second, "0": 0, "90": 90 * time.Second, "-1m": -time.Minute}
	for in, want := range ok {
		c, err := loadConfig(flags(t, "--keep-alive", in), envOf(map[string]string{"MODELD_HOME": home}))
		if err != nil || c.KeepAlive != want {
			t.Errorf("--keep-alive %q -> %s, %v; want %s", in, c.KeepAlive, err, want)
		}
		c, err = loadConfig(flags(t), envOf(map[string]string{"MODELD_HOME": home, "MODELD_KEEP_ALIVE": in}))
		if err != nil || c.KeepAlive != want {
			t.Errorf("MODELD_KEEP_ALIVE=%q -> %s, %v; want %s", in, c.KeepAlive, err, want)
		}
	}
	for _, in := range []string{"10 minutes", "1e3", "", "soon", "inf", "5 m"} {
		_, err := loadConfig(flags(t, "--keep-alive", in), envOf(map[string]string{"MODELD_HOME": home}))
		if err == nil || !strings.Contains(err.Error(), "invalid keep-alive (flag --keep-alive)") || !strings.Contains(err.Error(), "want a duration") {
			t.Errorf("--keep-alive %q: err = %v, want it refused naming keep-alive", in, err)
		}
	}
	if err := os.WriteFile(filepath.Join(home, "config.json"), []byte(`{"keep_alive": "10 minutes"}`), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := loadConfig(flags(t), envOf(map[string]string{"MODELD_HOME": home})); err == nil || !strings.Contains(err.Error(), "invalid keep-alive") {
		t.Errorf("config file keep_alive \"10 minutes\": err = %v", err)
	}
	for file, want := range map[string]string{`{"keep_alive": 1e3}`: "invalid keep-alive", `{"keep_alive": 300}`: ""} {
		if err := os.WriteFile(filepath.Join(home, "config.json"), []byte(file), 0o644); err != nil {
			t.Fatal(err)
		}
		c, err := loadConfig(flags(t), envOf(map[string]string{"MODELD_HOME": home}))
		if want == "" && (err != nil || c.KeepAlive != 300*time.Second) || want != "" && (err == nil || !strings.Contains(err.Error(), want)) {
			t.Errorf("config file %s: keep-alive %s, err = %v", file, c.KeepAlive, err)
		}
	}
}

func TestParseSize(t *testing.T) {
	for in, want := range map[string]int64{"auto": 0, "1024": 1024, "16GiB": 16 << 30, "800MB": 800e6, "1.5g": 3 << 29} {
		var n int64
		if err := parseSize(&n, in); err != nil || n != want {
			t.Errorf("%q -> %d, %v; want %d", in, n, err, want)
		}
	}
}
