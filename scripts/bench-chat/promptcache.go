package main

// The on-disk prompt cache's measurement (scripts/bench-chat/prompt-cache):
// an agent's first turn, as the pinned Claude Code CLI sends it, timed
// cold, warm, after a daemon restart and after a keep-alive unload.
//
//	bench-chat record -target URL -out BODY.json
//	    a reverse proxy in front of the daemon; prints its URL, then keeps
//	    the largest POST /v1/messages body it forwarded in BODY.json until
//	    its standard input closes
//	bench-chat turn -url URL -body BODY.json [-keep-alive 0] [-tokens N]
//	    one non-streaming /v1/messages call of BODY.json (max_tokens N,
//	    temperature 0): its time and its prompt and cached token counts
//	bench-chat cache-summary -turns T.json ... [-doc F]
//	    medians per kind of turn, the ratios against the warm turn, and the
//	    "## Prompt cache on disk" section of docs/PERFORMANCE.md

import (
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/modeld/modeld/internal/perfdoc"
)

func runRecord(args []string) error {
	fs := flag.NewFlagSet("record", flag.ContinueOnError)
	target := fs.String("target", "", "daemon base URL")
	out := fs.String("out", "", "file for the largest /v1/messages body")
	if err := fs.Parse(args); err != nil {
		return err
	}
	tu, err := url.Parse(*target)
	if err != nil || *out == "" {
		return fmt.Errorf("record: -target URL and -out FILE are required")
	}
	proxy := httputil.NewSingleHostReverseProxy(tu)
	proxy.FlushInterval = -1
	var mu sync.Mutex
	largest := 0
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		raw, err := io.ReadAll(r.Body)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		if r.Method == http.MethodPost && r.URL.Path == "/v1/messages" {
			mu.Lock()
			if len(raw) > largest {
				largest = len(raw)
				if err := os.WriteFile(*out, raw, 0o600); err != nil {
					fmt.Fprintln(os.Stderr, "bench-chat record:", err)
				}
			}
			mu.Unlock()
		}
		r.Body = io.NopCloser(bytes.NewReader(raw))
		r.ContentLength = int64(len(raw))
		r.Host = tu.Host
		proxy.ServeHTTP(w, r)
	})}
	go func() { _ = srv.Serve(ln) }()
	fmt.Printf("http://%s\n", ln.Addr())
	_, _ = io.Copy(io.Discard, os.Stdin)
	return srv.Close()
}

// turnResult is one timed turn.
type turnResult struct {
	Kind   string  `json:"kind"`
	Ms     float64 `json:"ms"`
	Prompt int     `json:"prompt"` // input tokens, cached ones included
	Cached int     `json:"cached"`
}

func runTurn(args []string) error {
	fs := flag.NewFlagSet("turn", flag.ContinueOnError)
	base := fs.String("url", "", "daemon base URL")
	bodyFile := fs.String("body", "", "recorded /v1/messages body")
	kind := fs.String("kind", "", "what this turn is (cold, warm, restart, restart-at-once, unload)")
	keepAlive := fs.String("keep-alive", "", "keep_alive of the request (\"\": the daemon's)")
	tokens := fs.Int("tokens", 16, "max_tokens")
	if err := fs.Parse(args); err != nil {
		return err
	}
	raw, err := os.ReadFile(*bodyFile)
	if err != nil {
		return err
	}
	var body map[string]any
	if err := json.Unmarshal(raw, &body); err != nil {
		return fmt.Errorf("%s: %w", *bodyFile, err)
	}
	body["stream"], body["max_tokens"], body["temperature"] = false, *tokens, 0
	delete(body, "thinking")
	if *keepAlive != "" {
		if n, err := strconv.Atoi(*keepAlive); err == nil {
			body["keep_alive"] = n
		} else {
			body["keep_alive"] = *keepAlive
		}
	}
	req, _ := json.Marshal(body)
	start := time.Now()
	res, err := http.Post(strings.TrimRight(*base, "/")+"/v1/messages", "application/json", bytes.NewReader(req))
	if err != nil {
		return err
	}
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	ms := float64(time.Since(start).Microseconds()) / 1000
	if err != nil {
		return err
	}
	if res.StatusCode != http.StatusOK {
		return fmt.Errorf("/v1/messages = %d: %s", res.StatusCode, b)
	}
	var ans struct {
		Usage struct {
			Input     int `json:"input_tokens"`
			CacheRead int `json:"cache_read_input_tokens"`
		} `json:"usage"`
	}
	if err := json.Unmarshal(b, &ans); err != nil {
		return err
	}
	return printJSON(turnResult{Kind: *kind, Ms: ms, Prompt: ans.Usage.Input + ans.Usage.CacheRead, Cached: ans.Usage.CacheRead})
}

// turnKinds are the turns in the order the tables show them.
var turnKinds = []struct{ kind, label string }{
	{"warm", "warm turn (the prompt in its slot)"},
	{"restart", "first turn after a daemon restart (its model loaded again at start, a slot primed)"},
	{"restart-at-once", "first turn sent the moment a restarted daemon answers (its model still loading)"},
	{"unload", "first turn after a keep-alive unload"},
	{"cold", "cold turn (prompt cache off: what a restart or unload cost before)"},
}

func runCacheSummary(args []string, w io.Writer) error {
	fs := flag.NewFlagSet("cache-summary", flag.ContinueOnError)
	var files listFlag
	fs.Var(&files, "turns", "JSON lines of turn results (repeatable)")
	doc := fs.String("doc", "", "rewrite this file's prompt-cache section")
	machine := fs.String("machine", "", "the machine, in words")
	model := fs.String("model", "the benchmark model", "the model, in words")
	command := fs.String("command", "scripts/bench-chat/prompt-cache", "the command that reproduces it")
	if err := fs.Parse(args); err != nil {
		return err
	}
	ms := map[string][]float64{}
	prompt, cached := map[string]int{}, map[string][]float64{}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			return err
		}
		dec := json.NewDecoder(bytes.NewReader(b))
		for dec.More() {
			var r turnResult
			if err := dec.Decode(&r); err != nil {
				return fmt.Errorf("%s: %w", f, err)
			}
			ms[r.Kind] = append(ms[r.Kind], r.Ms)
			prompt[r.Kind] = max(prompt[r.Kind], r.Prompt)
			cached[r.Kind] = append(cached[r.Kind], float64(r.Cached))
		}
	}
	warm := median(ms["warm"])
	if warm == 0 {
		return fmt.Errorf("no warm turn measured")
	}
	var sb strings.Builder
	fmt.Fprintf(&sb, "## Prompt cache on disk\n\n")
	fmt.Fprintf(&sb, "Reproduce: `%s`. An agent's first turn as the pinned Claude Code CLI sends it (its\n", *command)
	fmt.Fprintf(&sb, "request recorded at the start of the run, replayed with max_tokens 16, temperature 0), on\n")
	fmt.Fprintf(&sb, "%s. Every kind of turn is measured in each round of the one run; medians over the\n", *model)
	fmt.Fprintf(&sb, "rounds, the ratio against the warm turn.\n")
	if *machine != "" {
		fmt.Fprintf(&sb, "Machine: %s.\n", *machine)
	}
	fmt.Fprintf(&sb, "\n| turn | prompt tokens | from cache (median) | time (ms) | × warm | rounds (ms) |\n|---|---|---|---|---|---|\n")
	for _, k := range turnKinds {
		xs := ms[k.kind]
		if len(xs) == 0 {
			continue
		}
		parts := make([]string, len(xs))
		for i, x := range xs {
			parts[i] = fmt.Sprintf("%.0f", x)
		}
		fmt.Fprintf(&sb, "| %s | %d | %.0f | %.0f | %.2f× | %s |\n", k.label, prompt[k.kind], median(cached[k.kind]), median(xs), median(xs)/warm, strings.Join(parts, " "))
	}
	fmt.Fprintf(&sb, "\nGoal: ≤ 1.3× warm after a restart and after an unload.\n")
	for _, k := range []string{"restart", "unload"} {
		if xs := ms[k]; len(xs) > 0 {
			r := median(xs) / warm
			verdict := "met"
			if r > 1.3 {
				verdict = "not met"
			}
			fmt.Fprintf(&sb, "- %s: %.2f× (%s).\n", k, r, verdict)
		}
	}
	out := sb.String()
	fmt.Fprint(w, out)
	if *doc != "" {
		old, err := os.ReadFile(*doc)
		if err != nil && !os.IsNotExist(err) {
			return err
		}
		return os.WriteFile(*doc, []byte(perfdoc.UpdateSection(string(old), "## Prompt cache on disk", out)), 0o644)
	}
	return nil
}
