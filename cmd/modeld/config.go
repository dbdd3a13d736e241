package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/pflag"

	"github.com/modeld/modeld/api/responses"
	"github.com/modeld/modeld/backends"
	"github.com/modeld/modeld/backends/llama"
	"github.com/modeld/modeld/backends/llama/promptcache"
	"github.com/modeld/modeld/cache"
	"github.com/modeld/modeld/models"
	"github.com/modeld/modeld/pipelines"
)

// Config is every setting of modeld, read once at start by loadConfig and passed
// down. Nothing below cmd/modeld reads environment variables.
type Config struct {
	Listen     string
	Host       string // the daemon the CLI talks to; "": the one serving Home (daemonfile.go)
	Home       string
	LibDir     string
	ConfigFile string
	LogLevel   string
	LogFormat  string

	KeepAlive time.Duration // < 0: keep loaded forever
	// RestoreModels loads the models loaded at the last stop again at start (resident.go).
	RestoreModels bool
	MaxLoaded     int
	RAMBudget     int64 // 0: automatic (a share of total RAM)
	VRAMBudget    int64 // per GPU; 0: automatic (a share of each GPU's memory)
	QueueSize     int
	LoadWait      time.Duration
	ChatSlots     int
	Lookup        int // prompt-lookup draft tokens per step (0 off)
	// ReuseAnswers evaluates an idle chat model's last answers again so
	// that the next turn reuses them (backends/llama/engine/answers.go).
	ReuseAnswers bool
	ContextSize  int
	// Aliases map the model names agents ask for (claude-sonnet-*, gpt-5.5)
	// to models of the store.
	Aliases      modelAliases
	Threads      int // 0: measured default
	BatchThreads int // 0: measured default
	GPUTasks     []string
	BatchTokens  int
	BatchWait    time.Duration
	Lanes        int // 0: automatic
	Origins      []string
	ProbeTimeout time.Duration
	// AllowSoftwareGPU makes software GPUs (Mesa's llvmpipe Vulkan device)
	// usable: for tests and demos of the offload path, never for speed.
	AllowSoftwareGPU bool

	// Who may talk to the daemon (docs/SECURITY.md).
	APIKey       string   // from --api-key / MODELD_API_KEY or the key file; never printed
	APIKeyFile   string   // file holding the key (first line)
	AllowedHosts []string // Host names served besides loopback names and addresses
	Extensions   []string // browser extension ids allowed; empty: every extension
	// MetricsWithoutKey serves GET /metrics without the API key, for
	// scrapers that cannot send one (an inference gateway's endpoint picker).
	MetricsWithoutKey bool

	// Faults and bounds.
	StallTimeout     time.Duration // a runner silent this long with work in flight is killed
	ShutdownGrace    time.Duration // how long live streams may finish after SIGTERM
	AllowPrivatePull bool          // pull may fetch loopback, link-local and private addresses
	// AllowRemoteImages lets chat requests give images by http(s) URL,
	// fetched through the pull's network guard (AllowPrivatePull applies).
	AllowRemoteImages bool
	MaxDownload       int64    // largest model file pull accepts; 0: bounded by free disk only
	RunnerWrapper     []string // program and arguments chat runners start under (an emulator, nice); empty: directly

	// The on-disk prompt cache (backends/llama/promptcache): the KV of long
	// prompt prefixes that a chat model's slots drop, kept under the home.
	PromptCache     bool
	PromptCacheSize int64 // bytes, lowered to the free disk less a margin

	// The responses /v1/responses keeps for previous_response_id.
	ResponsesStoreSize     int64 // bytes; 0: keep none
	ResponsesStoreEntries  int   // most responses kept
	ResponsesStoreLifetime time.Duration

	// KeepBillingHeader keeps Claude Code's x-anthropic-billing-header line
	// in the system prompt (api.Options.KeepBillingHeader).
	KeepBillingHeader bool

	HFEndpoint string
	HFToken    string // from HF_TOKEN; never printed
	Offline    bool

	// sources says where each setting's value came from (by setting name:
	// one of the source constants); /v1/system shows it.
	sources map[string]string
}

// Where a setting's value came from.
const (
	sourceFlag    = "flag"
	sourceEnv     = "environment"
	sourceFile    = "file" // the config file
	sourceDefault = "default"
	sourceKeyFile = "api_key_file" // the API key, read from --api-key-file
)

// Tasks the GPU allowlist may name, from backends' task vocabulary. Zero-shot
// classification runs on a classifier, so it follows classify.
var knownTasks = []string{backends.TaskChat, backends.TaskEmbed, backends.TaskClassify, backends.TaskRerank, backends.TaskSummarize,
	backends.TaskImageClassify, backends.TaskImageEmbed}

// setting is one configuration value: a flag --name, the environment variable
// MODELD_NAME, and the config-file key name (dashes become underscores). It is
// the one description of the value: the flags and their help, the README's
// table, the defaults and what /v1/system shows are all derived from it.
type setting struct {
	name    string
	global  bool // a flag of every command, not only of serve
	boolean bool // --name alone means true
	help    string
	def     func(c *Config) string
	// doc is the default as the documentation writes it, when def depends on
	// the machine (the home directory); "" means def's text.
	doc   string
	apply func(c *Config, v string) error
	// show is the effective value as /v1/system shows it. A secret's show
	// gives the secret itself, of which only whether it is set is shown.
	show   func(c *Config) any
	secret bool
	// envVar, when set, is the only place the value is read from: an
	// environment variable of another program's convention (HF_TOKEN), with
	// no flag and no config-file key.
	envVar string
}

func (s setting) env() string {
	if s.envVar != "" {
		return s.envVar
	}
	return "MODELD_" + strings.ToUpper(strings.ReplaceAll(s.name, "-", "_"))
}

func (s setting) key() string { return strings.ReplaceAll(s.name, "-", "_") }

// hasFlag reports whether the setting is also a flag and a config-file key.
func (s setting) hasFlag() bool { return s.envVar == "" }

// defaultText is the default as help and the README show it.
func (s setting) defaultText() string {
	if s.doc != "" {
		return s.doc
	}
	return s.def(&Config{Home: "$MODELD_HOME"})
}

func static(v string) func(*Config) string { return func(*Config) string { return v } }

// settings in resolution order: home first, since other defaults derive from it.
// A default that is also a package's own (cache, backends, pipelines, models)
// is that package's constant, so the two cannot drift apart.
var settings = []setting{
	{name: "home", global: true, help: "directory of the model store, runtime libraries and config file",
		def: func(*Config) string { return defaultHome() }, doc: "$XDG_DATA_HOME/modeld or ~/.local/share/modeld",
		apply: func(c *Config, v string) error {
			if v == "" {
				return errors.New("must not be empty")
			}
			c.Home = v
			return nil
		},
		show: func(c *Config) any { return c.Home }},
	{name: "config", global: true, help: "optional JSON config file (keys are setting names with underscores)",
		def:   func(c *Config) string { return filepath.Join(c.Home, "config.json") },
		apply: func(c *Config, v string) error { c.ConfigFile = v; return nil },
		show:  func(c *Config) any { return c.ConfigFile }},
	{name: "lib-dir", global: true, help: "runtime libraries installed by scripts/bootstrap (llama/ and onnxruntime/)",
		def:   func(c *Config) string { return filepath.Join(c.Home, "lib") },
		apply: func(c *Config, v string) error { c.LibDir = v; return nil },
		show:  func(c *Config) any { return c.LibDir }},
	{name: "listen", global: true, help: "address the daemon listens on (host:port); the CLI finds its daemon by the home, and looks here when the home has no record of one",
		def: static("127.0.0.1:11435"), apply: parseListen,
		show: func(c *Config) any { return c.Listen }},
	{name: "host", global: true, help: "daemon the CLI talks to (host:port or http URL); default: the daemon serving --home, found in its daemon.json",
		def: static(""), apply: func(c *Config, v string) error { c.Host = v; return nil },
		show: func(c *Config) any { return c.Host }},
	{name: "log-level", global: true, help: "log level: debug, info, warn or error",
		def: static("info"), apply: func(c *Config, v string) error {
			return oneOf(&c.LogLevel, v, "debug", "info", "warn", "error")
		},
		show: func(c *Config) any { return c.LogLevel }},
	{name: "log-format", global: true, help: "log format: text or json",
		def: static("text"), apply: func(c *Config, v string) error { return oneOf(&c.LogFormat, v, "text", "json") },
		show: func(c *Config) any { return c.LogFormat }},
	{name: "hf-endpoint", global: true, help: "base URL of the model hub used by pull",
		def: static(models.DefaultEndpoint), apply: func(c *Config, v string) error {
			if !strings.HasPrefix(v, "https://") && !strings.HasPrefix(v, "http://") {
				return fmt.Errorf("%q is not an http(s) URL", v)
			}
			c.HFEndpoint = strings.TrimRight(v, "/")
			return nil
		},
		show: func(c *Config) any { return c.HFEndpoint }},
	{name: "hf-token", envVar: "HF_TOKEN", secret: true, help: "token that pull sends to the model hub (read from the environment only; never shown)",
		def: static(""), apply: func(c *Config, v string) error { c.HFToken = v; return nil },
		show: func(c *Config) any { return c.HFToken }},
	{name: "offline", global: true, boolean: true, help: "refuse every network access (pull fails with a clear error)",
		def: static("false"), apply: func(c *Config, v string) error {
			b, err := strconv.ParseBool(v)
			c.Offline = b
			return err
		},
		show: func(c *Config) any { return c.Offline }},

	{name: "keep-alive", help: "how long an idle model stays loaded (a duration such as 5m, or seconds; 0 = unload when idle, negative = forever); a request's keep_alive reads the same forms",
		def: static(durationText(cache.DefaultKeepAlive)), apply: func(c *Config, v string) error { return parseDuration(&c.KeepAlive, v, true) },
		show: func(c *Config) any { return durationText(c.KeepAlive) }},
	{name: "restore-models", boolean: true, help: "at start, load again in the background the models that were loaded when the daemon last stopped (the most recently used first, while they fit), so the first request after a restart finds its model loaded",
		def: static("true"), apply: func(c *Config, v string) error {
			b, err := strconv.ParseBool(v)
			c.RestoreModels = b
			return err
		},
		show: func(c *Config) any { return c.RestoreModels }},
	{name: "max-loaded", help: "most models loaded at once",
		def: static("3"), apply: func(c *Config, v string) error { return parseInt(&c.MaxLoaded, v, 1) },
		show: func(c *Config) any { return c.MaxLoaded }},
	{name: "ram-budget", help: "RAM that loaded models may use (e.g. 16GiB, 800MB; auto = 80% of total RAM)",
		def: static("auto"), apply: func(c *Config, v string) error { return parseSize(&c.RAMBudget, v) },
		show: func(c *Config) any { return sizeText(c.RAMBudget) }},
	{name: "vram-budget", help: "memory per GPU that loaded models may use (auto = 90% of each GPU's memory)",
		def: static("auto"), apply: func(c *Config, v string) error { return parseSize(&c.VRAMBudget, v) },
		show: func(c *Config) any { return sizeText(c.VRAMBudget) }},
	{name: "queue-size", help: "requests that may wait for a busy model before it answers 503",
		def: static("32"), apply: func(c *Config, v string) error { return parseInt(&c.QueueSize, v, 0) },
		show: func(c *Config) any { return c.QueueSize }},
	{name: "load-wait", help: "how long a load waits for memory held by busy models before it answers 503",
		def: static(durationText(cache.DefaultConfig().MaxWait)), apply: func(c *Config, v string) error { return parseDuration(&c.LoadWait, v, false) },
		show: func(c *Config) any { return durationText(c.LoadWait) }},
	{name: "chat-slots", help: "parallel sequences per chat model (continuous batching)",
		def: static(strconv.Itoa(llama.DefaultSlots)), apply: func(c *Config, v string) error { return parseInt(&c.ChatSlots, v, 1) },
		show: func(c *Config) any { return c.ChatSlots }},
	{name: "context-size", help: "context per sequence of a chat model, in tokens: auto = the model's trained context, halved while the model's memory estimate exceeds the RAM budget (the daemon logs the choice, modeld ps shows it); a number caps it (a model's trained context is used when smaller)",
		def: static("auto"), apply: func(c *Config, v string) error {
			if strings.EqualFold(strings.TrimSpace(v), "auto") {
				c.ContextSize = 0
				return nil
			}
			return parseInt(&c.ContextSize, v, 64)
		},
		show: func(c *Config) any { return contextText(c.ContextSize) }},
	{name: "model-aliases", help: "names a request may give for a model of the store (comma list of PATTERN=MODEL, * and ? as wildcards, the first match wins; a name the store holds is never an alias), e.g. claude-sonnet-*=qwen3,gpt-5.5=qwen3",
		def: static(""), apply: func(c *Config, v string) error {
			as, err := parseAliases(v)
			c.Aliases = as
			return err
		},
		show: func(c *Config) any { return c.Aliases.String() }},
	{name: "prompt-lookup", help: "speculative decoding of chat models by prompt lookup: the most tokens a decode step drafts from the request's prompt and output, verified in the same step (0 = off, where a request's speculative: true drafts " + strconv.Itoa(llama.DefaultLookup) + "); a request that keeps few drafts stops drafting",
		def: static("0"), apply: func(c *Config, v string) error { return parseInt(&c.Lookup, v, 0) },
		show: func(c *Config) any { return c.Lookup }},
	{name: "reuse-answers", boolean: true, help: "while a chat model is idle (an agent running its tool), evaluate its last answers again as prompt text, so that the next turn, which repeats the answer, reuses it instead of evaluating it before its first token; output is the same either way",
		def: static("true"), apply: func(c *Config, v string) error {
			b, err := strconv.ParseBool(v)
			c.ReuseAnswers = b
			return err
		},
		show: func(c *Config) any { return c.ReuseAnswers }},
	{name: "threads", help: "CPU threads per model; for chat, of one-token decode steps (0 = measured default for this machine)",
		def: static("0"), apply: func(c *Config, v string) error { return parseInt(&c.Threads, v, 0) },
		show: func(c *Config) any { return c.Threads }},
	{name: "batch-threads", help: "CPU threads of a chat model's multi-token steps: prompt chunks, several streams (0 = measured default for this machine)",
		def: static("0"), apply: func(c *Config, v string) error { return parseInt(&c.BatchThreads, v, 0) },
		show: func(c *Config) any { return c.BatchThreads }},
	{name: "gpu-tasks", help: "tasks allowed on a GPU when one is usable (comma list of chat, embed, classify, rerank, summarize, image-classify, image-embed; or none); summarize runs on the CPU unless listed",
		def: static("chat,embed,classify,rerank,image-classify,image-embed"), apply: parseTasks,
		show: func(c *Config) any { return listText(c.GPUTasks) }},
	{name: "batch-tokens", help: "token budget of one merged forward pass of a task pipeline",
		def: static(strconv.Itoa(pipelines.DefaultBatchTokens)), apply: func(c *Config, v string) error { return parseInt(&c.BatchTokens, v, 1) },
		show: func(c *Config) any { return c.BatchTokens }},
	{name: "batch-wait", help: "how long a task pipeline waits to merge concurrent requests",
		def: static(durationText(pipelines.DefaultBatchWait)), apply: func(c *Config, v string) error { return parseDuration(&c.BatchWait, v, false) },
		show: func(c *Config) any { return durationText(c.BatchWait) }},
	{name: "pipeline-lanes", help: "parallel forward passes of a merged batch on a CPU embed/classify/rerank model, sharing its threads; 1 = off, saving a second copy of the weights (0 = the threads, at most 4, for models up to 512 MiB)",
		def: static("0"), apply: func(c *Config, v string) error { return parseInt(&c.Lanes, v, 0) },
		show: func(c *Config) any { return c.Lanes }},
	{name: "origins", help: "extra browser origins allowed by CORS (comma list; loopback pages and browser extensions are always allowed; any other origin gets 403)",
		def: static(""), apply: func(c *Config, v string) error { c.Origins = splitList(v); return nil },
		show: func(c *Config) any { return listText(c.Origins) }},
	{name: "api-key", global: true, secret: true, help: "key every request must send (Authorization: Bearer KEY or x-api-key: KEY); required when listening beyond loopback; the CLI sends it",
		def: static(""), apply: func(c *Config, v string) error { c.APIKey = strings.TrimSpace(v); return nil },
		show: func(c *Config) any { return c.APIKey }},
	{name: "api-key-file", global: true, help: "file whose first line is the API key (instead of --api-key)",
		def: static(""), apply: func(c *Config, v string) error { c.APIKeyFile = v; return nil },
		show: func(c *Config) any { return c.APIKeyFile }},
	{name: "metrics-without-key", boolean: true, help: "serve GET /metrics without the API key, for scrapers that cannot send one (an inference gateway's endpoint picker); it shows model ids and counts, never a prompt",
		def: static("false"), apply: func(c *Config, v string) error {
			b, err := strconv.ParseBool(v)
			c.MetricsWithoutKey = b
			return err
		},
		show: func(c *Config) any { return c.MetricsWithoutKey }},
	{name: "allowed-hosts", help: "host names the daemon answers to besides loopback names and addresses (comma list; a request with another Host header gets 403)",
		def: static(""), apply: func(c *Config, v string) error { c.AllowedHosts = splitList(v); return nil },
		show: func(c *Config) any { return listText(c.AllowedHosts) }},
	{name: "extensions", help: "browser extension ids allowed as origins (comma list; empty = every extension)",
		def: static(""), apply: func(c *Config, v string) error { c.Extensions = splitList(v); return nil },
		show: func(c *Config) any { return listText(c.Extensions) }},
	{name: "stall-timeout", help: "a chat runner that answers nothing this long while it has work is killed and reloaded (it is refused with 503s after a quarter of it; one decode step may take three times it)",
		def: static(durationText(llama.DefaultStallTimeout)), apply: func(c *Config, v string) error { return parsePositiveDuration(&c.StallTimeout, v) },
		show: func(c *Config) any { return durationText(c.StallTimeout) }},
	{name: "runner-wrapper", help: "program and arguments every chat runner is started under, space-separated (nice -n 10, or an emulator such as qemu-aarch64 -L /usr/aarch64-linux-gnu); empty: runners run directly",
		def: static(""), apply: parseRunnerWrapper,
		show: func(c *Config) any { return strings.Join(c.RunnerWrapper, " ") }},
	{name: "shutdown-grace", help: "on SIGTERM, how long live streams may finish before they are ended with an error event",
		def: static("2s"), apply: func(c *Config, v string) error { return parseDuration(&c.ShutdownGrace, v, false) },
		show: func(c *Config) any { return durationText(c.ShutdownGrace) }},
	{name: "prompt-cache", boolean: true, help: "keep the KV of long prompt prefixes on disk (under the home, in kvcache/) when a chat model drops them (keep-alive or memory unload, slot eviction, shutdown) and restore them for a later prompt that shares them; modeld du shows it, modeld prune --cache empties it",
		def: static("true"), apply: func(c *Config, v string) error {
			b, err := strconv.ParseBool(v)
			c.PromptCache = b
			return err
		},
		show: func(c *Config) any { return c.PromptCache }},
	{name: "prompt-cache-size", help: "disk the prompt cache may take (e.g. 4GiB), never more than the free disk less 1 GiB; the least recently used prefixes go first",
		def: static(fmt.Sprintf("%dGiB", promptcache.DefaultMaxBytes>>30)), apply: func(c *Config, v string) error {
			if strings.EqualFold(strings.TrimSpace(v), "auto") {
				return errors.New("give a size such as 4GiB (turn the cache off with prompt-cache=false)")
			}
			if err := parseSize(&c.PromptCacheSize, v); err != nil {
				return err
			}
			if c.PromptCacheSize <= 0 {
				return errors.New("must be above 0 (turn the cache off with prompt-cache=false)")
			}
			return nil
		},
		show: func(c *Config) any { return c.PromptCacheSize }},
	{name: "responses-store-size", help: "memory for the responses that /v1/responses keeps for previous_response_id and GET /v1/responses/{id} (e.g. 64MiB; 0 = keep none; the oldest dropped first)",
		def: static(fmt.Sprintf("%dMiB", responses.DefaultResponseStoreBytes>>20)), apply: func(c *Config, v string) error {
			if strings.EqualFold(strings.TrimSpace(v), "auto") {
				return errors.New("give a size such as 64MiB (0 keeps no response)")
			}
			return parseSize(&c.ResponsesStoreSize, v)
		},
		show: func(c *Config) any { return c.ResponsesStoreSize }},
	{name: "responses-store-entries", help: "most responses that /v1/responses keeps, whatever their size (the oldest dropped first)",
		def: static(strconv.Itoa(responses.DefaultResponseStoreEntries)), apply: func(c *Config, v string) error { return parseInt(&c.ResponsesStoreEntries, v, 1) },
		show: func(c *Config) any { return c.ResponsesStoreEntries }},
	{name: "responses-store-lifetime", help: "how long a stored response may be continued (previous_response_id) or fetched",
		def: static(durationText(responses.DefaultResponseStoreLifetime)), apply: func(c *Config, v string) error { return parsePositiveDuration(&c.ResponsesStoreLifetime, v) },
		show: func(c *Config) any { return durationText(c.ResponsesStoreLifetime) }},
	{name: "keep-billing-header", boolean: true, help: "keep the x-anthropic-billing-header line that Claude Code puts first in its system prompt (it changes with every session); off: the Messages API drops it, so that a new session reuses the prompt cached by the last one",
		def: static("false"), apply: func(c *Config, v string) error {
			b, err := strconv.ParseBool(v)
			c.KeepBillingHeader = b
			return err
		},
		show: func(c *Config) any { return c.KeepBillingHeader }},
	{name: "allow-remote-images", boolean: true, help: "let chat requests give images by http(s) URL, which the daemon then fetches through pull's network guard (no loopback, link-local or private addresses unless --allow-private-pull); off: only inline images (data URLs, base64) are read",
		def: static("false"), apply: func(c *Config, v string) error {
			b, err := strconv.ParseBool(v)
			c.AllowRemoteImages = b
			return err
		},
		show: func(c *Config) any { return c.AllowRemoteImages }},
	{name: "allow-private-pull", boolean: true, help: "let pull fetch loopback, link-local and private network addresses (off: pull is not a proxy into the local network)",
		def: static("false"), apply: func(c *Config, v string) error {
			b, err := strconv.ParseBool(v)
			c.AllowPrivatePull = b
			return err
		},
		show: func(c *Config) any { return c.AllowPrivatePull }},
	{name: "max-download", help: "largest model file pull accepts (e.g. 64GiB; auto = bounded by free disk space only)",
		def: static("auto"), apply: func(c *Config, v string) error { return parseSize(&c.MaxDownload, v) },
		show: func(c *Config) any { return sizeText(c.MaxDownload) }},
	{name: "probe-timeout", help: "how long the GPU probe may take before a backend is reported as timed out",
		def: static("5s"), apply: func(c *Config, v string) error { return parseDuration(&c.ProbeTimeout, v, false) },
		show: func(c *Config) any { return durationText(c.ProbeTimeout) }},
	{name: "allow-software-gpu", global: true, boolean: true, help: "use a software GPU (a Vulkan device that is the CPU, such as Mesa's llvmpipe) as a GPU: for tests and demos of the offload path, not for production (it is slower than the CPU backend)",
		def: static("false"), apply: func(c *Config, v string) error {
			b, err := strconv.ParseBool(v)
			c.AllowSoftwareGPU = b
			return err
		},
		show: func(c *Config) any { return c.AllowSoftwareGPU }},
}

// envOnlyHelp describes the settings read only from the environment, for
// serve's help (they have no flag to list them).
func envOnlyHelp() string {
	var b strings.Builder
	for _, s := range settings {
		if !s.hasFlag() {
			fmt.Fprintf(&b, "\n%s: %s.", s.env(), s.help)
		}
	}
	return b.String()
}

// shownSetting is one setting as /v1/system shows it: its value (a secret:
// only whether it is set) and where the value came from.
type shownSetting struct {
	Value  any    `json:"value,omitempty"`
	Set    *bool  `json:"set,omitempty"`
	Source string `json:"source"`
}

// public is the configuration as /v1/system shows it, derived from the
// settings table: every setting under its config-file key, and no secret.
func (c Config) public() map[string]shownSetting {
	out := make(map[string]shownSetting, len(settings))
	for _, s := range settings {
		sh := shownSetting{Source: c.sources[s.name]}
		if v := s.show(&c); s.secret {
			set := v != nil && v != ""
			sh.Set = &set
		} else {
			sh.Value = v
		}
		out[s.key()] = sh
	}
	return out
}

func defaultHome() string {
	if x := os.Getenv("XDG_DATA_HOME"); x != "" {
		return filepath.Join(x, "modeld")
	}
	h, err := os.UserHomeDir()
	if err != nil {
		return ".modeld"
	}
	return filepath.Join(h, ".local", "share", "modeld")
}

// addFlags registers the settings on fs: the global ones, or those of serve.
func addFlags(fs *pflag.FlagSet, global bool) {
	for _, s := range settings {
		if s.global != global || !s.hasFlag() {
			continue
		}
		fs.Var(&settingFlag{typ: s.flagType()}, s.name, fmt.Sprintf("%s (env %s, default %q)", s.help, s.env(), s.defaultText()))
		if s.boolean {
			fs.Lookup(s.name).NoOptDefVal = "true"
		}
	}
}

// loadConfig resolves every setting: flag > MODELD_* environment > config file >
// default. An invalid value is an error naming the setting.
func loadConfig(fs *pflag.FlagSet, getenv func(string) string) (Config, error) {
	c := Config{sources: map[string]string{}}
	var file map[string]any
	var errs []error
	for _, s := range settings {
		v, src := "", ""
		if f := fs.Lookup(s.name); s.hasFlag() && f != nil && f.Changed {
			v, src, c.sources[s.name] = f.Value.String(), "flag --"+s.name, sourceFlag
		} else if e := getenv(s.env()); e != "" {
			v, src, c.sources[s.name] = e, "environment "+s.env(), sourceEnv
		} else if fv, ok := file[s.key()]; ok && s.hasFlag() {
			v, src, c.sources[s.name] = fmt.Sprint(fv), fmt.Sprintf("%s key %q", c.ConfigFile, s.key()), sourceFile
		} else {
			v, src, c.sources[s.name] = s.def(&c), "default", sourceDefault
		}
		if err := s.apply(&c, v); err != nil {
			errs = append(errs, fmt.Errorf("invalid %s (%s) = %q: %w", s.name, src, v, err))
			continue
		}
		if s.name == "config" {
			var err error
			file, err = readConfigFile(c.ConfigFile, src != "default")
			if err != nil {
				errs = append(errs, err)
			}
		}
	}
	if c.APIKey == "" && c.APIKeyFile != "" {
		key, err := readKeyFile(c.APIKeyFile)
		if err != nil {
			errs = append(errs, fmt.Errorf("invalid api-key-file = %q: %w", c.APIKeyFile, err))
		}
		c.APIKey, c.sources["api-key"] = key, sourceKeyFile
	}
	return c, errors.Join(errs...)
}

// readConfigFile reads the optional JSON config file. A missing file is fine unless
// it was named explicitly; unknown keys are errors.
func readConfigFile(path string, explicit bool) (map[string]any, error) {
	b, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) && !explicit {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("config file: %w", err)
	}
	var m map[string]any
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber() // a number is read as written, like a request's keep_alive
	if err := dec.Decode(&m); err != nil {
		return nil, fmt.Errorf("config file %s: %w", path, err)
	}
	if dec.More() {
		return nil, fmt.Errorf("config file %s: more than one JSON value", path)
	}
	known := map[string]bool{}
	for _, s := range settings {
		known[s.key()] = s.hasFlag()
	}
	var unknown []string
	for k := range m {
		if !known[k] || k == "home" || k == "config" {
			unknown = append(unknown, k)
		}
	}
	if len(unknown) > 0 {
		sort.Strings(unknown)
		return nil, fmt.Errorf("config file %s: unknown keys %s (home, config and hf_token cannot be set there)", path, strings.Join(unknown, ", "))
	}
	return m, nil
}

// autoContextBound is what the API takes as the largest context of any
// model when --context-size is auto: no trained context is larger.
const autoContextBound = 1 << 20

// contextCap is the bound on every chat model's context that the API checks
// requests against before a model is loaded: --context-size, or
// autoContextBound for auto.
func (c Config) contextCap() int {
	if c.ContextSize > 0 {
		return c.ContextSize
	}
	return autoContextBound
}

// contextText shows --context-size: auto or its number.
func contextText(n int) any {
	if n <= 0 {
		return "auto"
	}
	return n
}
