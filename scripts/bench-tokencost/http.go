package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

type httpParams struct {
	url, name, prompt, route string
	daemon, threads          int
	tokens, runs             int
	idle                     time.Duration
	warm                     bool
	label                    string
}

// runHTTP measures modeld serve: its runner process, the daemon and this
// client, over the decode part of greedy streams of p.tokens tokens.
func runHTTP(args []string) error {
	fs := flag.NewFlagSet("http", flag.ContinueOnError)
	var p httpParams
	fs.StringVar(&p.url, "url", "", "modeld base URL (required)")
	fs.StringVar(&p.name, "name", "", "model id (required)")
	fs.IntVar(&p.daemon, "daemon", 0, "PID of modeld serve (required)")
	fs.StringVar(&p.prompt, "prompt", "Hello world, tell me a story about the water", "prompt text")
	fs.StringVar(&p.route, "route", "completions", "completions (/v1/completions) or chat (/v1/chat/completions)")
	fs.IntVar(&p.threads, "threads", 2, "the daemon's --threads (the runner's compute threads)")
	fs.IntVar(&p.tokens, "tokens", 256, "max_tokens of each request")
	fs.IntVar(&p.runs, "runs", 5, "streams measured")
	fs.DurationVar(&p.idle, "idle", 3*time.Second, "how long the processes are measured at rest (0: not)")
	fs.BoolVar(&p.warm, "warm", true, "stream once before measuring (loads the model)")
	fs.StringVar(&p.label, "label", "", "names this daemon in the layer's name (e.g. a build)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if p.url == "" || p.name == "" || p.daemon == 0 {
		return errors.New("http: -url, -name and -daemon are required")
	}
	res := result{Threads: p.threads, Tokens: p.tokens, Label: p.label}
	name := "modeld serve"
	if p.label != "" {
		name += " (" + p.label + ")"
	}
	l := layer{Name: name + ", /v1/" + strings.ReplaceAll(p.route, "chat", "chat/completions"), Procs: []string{"runner", "daemon", "client"}}
	first := 0
	if !p.warm {
		first = 1
	}
	for i := first; i <= p.runs; i++ { // run 0 loads the model and warms up
		runner, err := findRunner(p.daemon)
		if err != nil && i > 0 {
			return err
		}
		var mt *meter
		if runner != 0 {
			mt = newMeter([]string{strconv.Itoa(runner), strconv.Itoa(p.daemon), "self"}, []int{p.threads, 0, 0})
		}
		r, err := stream(p, mt)
		if err != nil {
			return err
		}
		if i > 0 {
			l.Runs = append(l.Runs, r)
		}
		if i == 0 && runner == 0 {
			if runner, err = findRunner(p.daemon); err != nil {
				return err
			}
		}
		if i == 0 && p.idle > 0 { // at rest, between streams: what time alone costs
			mt := newMeter([]string{strconv.Itoa(runner), strconv.Itoa(p.daemon)}, []int{p.threads, 0})
			if err := mt.start(); err != nil {
				return err
			}
			start := time.Now()
			time.Sleep(p.idle)
			procs, err := mt.stop()
			if err != nil {
				return err
			}
			res.Idle = &run{WallNs: time.Since(start).Nanoseconds(), Procs: procs}
		}
	}
	res.Layers = []layer{l}
	return printJSON(res)
}

// findRunner is the runner process the daemon started (0 when none is
// running yet).
func findRunner(daemon int) (int, error) {
	dirs, _ := filepath.Glob("/proc/[0-9]*")
	for _, d := range dirs {
		b, err := os.ReadFile(filepath.Join(d, "stat"))
		if err != nil {
			continue
		}
		// pid (comm) state ppid ...: comm may hold spaces, so cut at ")".
		i := bytes.LastIndexByte(b, ')')
		if i < 0 {
			continue
		}
		f := strings.Fields(string(b[i+1:]))
		if len(f) < 2 || f[1] != strconv.Itoa(daemon) {
			continue
		}
		cmd, _ := os.ReadFile(filepath.Join(d, "cmdline"))
		if parts := strings.Split(string(cmd), "\x00"); len(parts) > 1 && parts[1] == "runner" {
			return strconv.Atoi(filepath.Base(d))
		}
	}
	return 0, fmt.Errorf("no runner process under modeld serve (pid %d)", daemon)
}

// stream posts a greedy streaming request and measures from its first
// chunk with text to its last; mt nil measures nothing.
func stream(p httpParams, mt *meter) (run, error) {
	var r run
	body := map[string]any{"model": p.name, "max_tokens": p.tokens, "temperature": 0, "stream": true,
		"stream_options": map[string]any{"include_usage": true}}
	path := "/v1/completions"
	if p.route == "chat" {
		path = "/v1/chat/completions"
		body["messages"] = []map[string]string{{"role": "user", "content": p.prompt}}
	} else {
		body["prompt"] = p.prompt
	}
	b, _ := json.Marshal(body)
	resp, err := http.Post(strings.TrimRight(p.url, "/")+path, "application/json", bytes.NewReader(b))
	if err != nil {
		return r, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		msg, _ := bufio.NewReader(resp.Body).ReadString(0)
		return r, fmt.Errorf("%s: %s: %s", path, resp.Status, msg)
	}
	rd := bufio.NewReaderSize(resp.Body, 64<<10)
	var start, last time.Time
	completion := 0
	for {
		line, err := rd.ReadSlice('\n')
		if err != nil {
			return r, fmt.Errorf("stream ended before [DONE]: %w", err)
		}
		data, ok := bytes.CutPrefix(bytes.TrimRight(line, "\r\n"), []byte("data: "))
		if !ok {
			continue
		}
		if string(data) == "[DONE]" {
			break
		}
		var ev struct {
			Choices []struct {
				Text  string `json:"text"`
				Delta struct {
					Content string `json:"content"`
				} `json:"delta"`
			} `json:"choices"`
			Usage *struct {
				CompletionTokens int `json:"completion_tokens"`
			} `json:"usage"`
		}
		if err := json.Unmarshal(data, &ev); err != nil {
			return r, fmt.Errorf("chunk %q: %w", data, err)
		}
		if ev.Usage != nil {
			completion = ev.Usage.CompletionTokens
		}
		if len(ev.Choices) == 0 {
			continue
		}
		now := time.Now()
		if start.IsZero() {
			start = now
			if mt != nil {
				if err := mt.start(); err != nil {
					return r, err
				}
			}
		}
		last = now
	}
	if completion != p.tokens {
		return r, fmt.Errorf("%d completion tokens, want %d", completion, p.tokens)
	}
	r.Tokens, r.WallNs = completion-1, last.Sub(start).Nanoseconds()
	if mt != nil {
		r.Procs, err = mt.stop()
	}
	return r, err
}
