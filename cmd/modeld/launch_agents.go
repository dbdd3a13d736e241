package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
)

// launchTarget is what an agent CLI is pointed at: this daemon and one of
// its models.
type launchTarget struct {
	Base    string // the daemon's base URL, without /v1
	Key     string // the API key the daemon wants; "" when it wants none
	Model   string // the id the CLI asks for
	Context int    // the model's context window in tokens (0: unknown)
	Vision  bool   // the model takes images
	// Home is the user's home directory, and getenv reads the environment
	// the CLI will see: where each CLI keeps its configuration.
	Home   string
	getenv func(string) string
}

// key is the key the CLI sends: the daemon's, or a placeholder the daemon
// ignores (the CLIs refuse to start without one).
func (t launchTarget) key() string {
	if t.Key != "" {
		return t.Key
	}
	return "modeld"
}

// agentSettings are what launch gives one CLI: environment variables for
// its process, files written into its configuration (backed up first, and
// restored by --undo), and arguments put before the user's.
type agentSettings struct {
	Env   []string
	Files []agentFile
	Args  []string
}

// agentFile is a file launch writes: Data, or Merge applied to the file's
// current contents (nil when it does not exist).
type agentFile struct {
	Path  string
	Data  []byte
	Merge func(old []byte) ([]byte, error)
}

// agent is one CLI that modeld launch can start.
type agent struct {
	name     string // as launch takes it
	command  string // the executable
	install  string // how to install it
	settings func(t launchTarget) (agentSettings, error)
}

var agents = []agent{
	{name: "claude", command: "claude", install: "npm install -g @anthropic-ai/claude-code", settings: claudeSettings},
	{name: "codex", command: "codex", install: "npm install -g @openai/codex", settings: codexSettings},
	{name: "opencode", command: "opencode", install: "npm install -g opencode-ai", settings: opencodeSettings},
}

func findAgent(name string) (agent, error) {
	var names []string
	for _, a := range agents {
		if a.name == name {
			return a, nil
		}
		names = append(names, a.name)
	}
	return agent{}, fmt.Errorf("unknown agent %q (want one of %s)", name, strings.Join(names, ", "))
}

// claudeSettings point Claude Code at the daemon's Messages API through its
// environment only (it writes no file): the base URL and key, the model for
// the main loop and for each tier it picks by itself (the small fast model
// of titles and summaries, the subagents), the context window (an id it
// does not know otherwise counts as 1M tokens), and no traffic to its
// vendor (telemetry, error reports, updates).
func claudeSettings(t launchTarget) (agentSettings, error) {
	env := []string{
		"ANTHROPIC_BASE_URL=" + t.Base,
		"ANTHROPIC_AUTH_TOKEN=" + t.key(),
		"ANTHROPIC_MODEL=" + t.Model,
		"ANTHROPIC_DEFAULT_OPUS_MODEL=" + t.Model,
		"ANTHROPIC_DEFAULT_SONNET_MODEL=" + t.Model,
		"ANTHROPIC_DEFAULT_HAIKU_MODEL=" + t.Model,
		"ANTHROPIC_SMALL_FAST_MODEL=" + t.Model,
		"CLAUDE_CODE_SUBAGENT_MODEL=" + t.Model,
		"CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1",
		"DISABLE_TELEMETRY=1",
		"DISABLE_ERROR_REPORTING=1",
		"DISABLE_AUTOUPDATER=1",
	}
	if t.Context > 0 {
		env = append(env, "CLAUDE_CODE_MAX_CONTEXT_TOKENS="+strconv.Itoa(t.Context))
	}
	return agentSettings{Env: env}, nil
}

// codexProfile is the name of the profile launch writes for Codex: the file
// $CODEX_HOME/modeld.config.toml, which codex -p modeld layers over the
// user's own config.toml (left untouched).
const codexProfile = "modeld"

// codexHome is Codex's configuration directory: $CODEX_HOME, else ~/.codex.
func codexHome(t launchTarget) string {
	if d := t.getenv("CODEX_HOME"); d != "" {
		return d
	}
	return filepath.Join(t.Home, ".codex")
}

// codexSettings give Codex a profile with a modeld provider on the
// Responses wire API (the only one Codex takes for a custom provider) and a
// model catalog with the model's context window and input modalities, whose
// apply_patch tool is the freeform one (a custom tool constrained by its
// Lark grammar, which modeld samples under). The catalog's instructions are
// one line of modeld's instead of the vendor's prompt for its own models.
func codexSettings(t launchTarget) (agentSettings, error) {
	dir := codexHome(t)
	catalog := filepath.Join(dir, codexProfile+"-models.json")
	modalities := []string{"text"}
	if t.Vision {
		modalities = append(modalities, "image")
	}
	entry := map[string]any{
		"slug": t.Model, "display_name": t.Model, "description": "a local model served by modeld",
		"base_instructions":            "You are a coding agent in the Codex CLI on the user's machine. Use the tools to read and change files and to run commands; keep answers short.",
		"supported_reasoning_levels":   []any{},
		"shell_type":                   "shell_command",
		"visibility":                   "list",
		"supported_in_api":             true,
		"priority":                     0,
		"upgrade":                      nil,
		"supports_reasoning_summaries": false,
		"support_verbosity":            false,
		"default_verbosity":            nil,
		"apply_patch_tool_type":        "freeform",
		"truncation_policy":            map[string]any{"mode": "tokens", "limit": 10000},
		"supports_parallel_tool_calls": false,
		"experimental_supported_tools": []any{},
		"input_modalities":             modalities,
	}
	if t.Context > 0 {
		entry["context_window"] = t.Context
	}
	cat, err := json.MarshalIndent(map[string]any{"models": []any{entry}}, "", "  ")
	if err != nil {
		return agentSettings{}, err
	}
	var b strings.Builder
	fmt.Fprintf(&b, "# Written by modeld launch codex; modeld launch codex --undo removes it.\n")
	fmt.Fprintf(&b, "model = %s\nmodel_provider = %s\n", tomlString(t.Model), tomlString(codexProfile))
	fmt.Fprintf(&b, "model_catalog_json = %s\n", tomlString(catalog))
	if t.Context > 0 {
		fmt.Fprintf(&b, "model_context_window = %d\nmodel_auto_compact_token_limit = %d\n", t.Context, t.Context*9/10)
	}
	fmt.Fprintf(&b, "check_for_update_on_startup = false\n\n[analytics]\nenabled = false\n\n")
	fmt.Fprintf(&b, "[model_providers.%s]\nname = \"modeld\"\nbase_url = %s\nwire_api = \"responses\"\nenv_key = \"MODELD_API_KEY\"\n",
		codexProfile, tomlString(t.Base+"/v1"))
	return agentSettings{
		Env: []string{"MODELD_API_KEY=" + t.key()},
		Files: []agentFile{
			{Path: filepath.Join(dir, codexProfile+".config.toml"), Data: []byte(b.String())},
			{Path: catalog, Data: append(cat, '\n')},
		},
		Args: []string{"-p", codexProfile},
	}, nil
}

// tomlString quotes s as a TOML basic string (JSON's escapes are TOML's).
func tomlString(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}

// opencodeConfig is opencode's global config file: in $XDG_CONFIG_HOME/opencode
// (else ~/.config/opencode), opencode.json.
func opencodeConfig(t launchTarget) string {
	dir := t.getenv("XDG_CONFIG_HOME")
	if dir == "" {
		dir = filepath.Join(t.Home, ".config")
	}
	return filepath.Join(dir, "opencode", "opencode.json")
}

// opencodeSettings add a modeld provider (OpenAI-compatible, the chat
// completions route) with the model and its context window to opencode's
// global config, and make it the default model; what else the file holds
// is kept. Its environment turns off what would reach the network: the
// model list it fetches, updates, language-server downloads, sharing.
func opencodeSettings(t launchTarget) (agentSettings, error) {
	model := map[string]any{"name": t.Model, "tool_call": true}
	if t.Context > 0 {
		model["limit"] = map[string]any{"context": t.Context, "output": min(t.Context/4, 32768)}
	}
	provider := map[string]any{
		"npm": "@ai-sdk/openai-compatible", "name": "modeld",
		"options": map[string]any{"baseURL": t.Base + "/v1", "apiKey": t.key()},
		"models":  map[string]any{t.Model: model},
	}
	merge := func(old []byte) ([]byte, error) {
		cfg := map[string]any{}
		if len(old) > 0 {
			if err := json.Unmarshal(old, &cfg); err != nil {
				return nil, fmt.Errorf("opencode config is not JSON (modeld launch does not edit JSONC): %w", err)
			}
		}
		if _, ok := cfg["$schema"]; !ok {
			cfg["$schema"] = "https://opencode.ai/config.json"
		}
		providers, _ := cfg["provider"].(map[string]any)
		if providers == nil {
			providers = map[string]any{}
		}
		providers["modeld"] = provider
		cfg["provider"] = providers
		cfg["model"] = "modeld/" + t.Model
		cfg["small_model"] = "modeld/" + t.Model
		cfg["autoupdate"] = false
		cfg["share"] = "disabled"
		out, err := json.MarshalIndent(cfg, "", "  ")
		return append(out, '\n'), err
	}
	return agentSettings{
		Env: []string{
			"OPENCODE_DISABLE_AUTOUPDATE=1", "OPENCODE_DISABLE_MODELS_FETCH=1",
			"OPENCODE_DISABLE_LSP_DOWNLOAD=1", "OPENCODE_DISABLE_SHARE=1",
		},
		Files: []agentFile{{Path: opencodeConfig(t), Merge: merge}},
	}, nil
}

// contents is what f writes over the file's current contents old (nil:
// none).
func (f agentFile) contents(old []byte) ([]byte, error) {
	if f.Merge != nil {
		return f.Merge(old)
	}
	return f.Data, nil
}

// readOptional reads path; a missing file is nil and no error.
func readOptional(path string) ([]byte, error) {
	b, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	return b, err
}

// envNames lists the variables of env (NAME=value), sorted.
func envNames(env []string) []string {
	var names []string
	for _, e := range env {
		names = append(names, strings.SplitN(e, "=", 2)[0])
	}
	sort.Strings(names)
	return names
}
