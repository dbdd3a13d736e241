// Command bench-chat is the Go half of scripts/bench-chat/run, the chat
// benchmark of modeld against node-llama-cpp (peer.mjs). It has three
// subcommands, each printing one JSON document on stdout:
//
//	bench-chat engine  -model M.gguf -lib DIR [-modeld bin/modeld] ...
//	    time to first token and decode speed of the llama.cpp library called
//	    directly (yzma), of modeld's engine in this process (backends/llama),
//	    and of the engine in a runner child process (when -modeld is given)
//	bench-chat http    -url http://127.0.0.1:PORT -name bench/f16 ...
//	    the same through modeld's OpenAI streaming endpoint /v1/completions:
//	    decode speed and time to first token of one stream, and the
//	    aggregate decode speed of several concurrent streams
//	bench-chat summary -peer P.json -engine E.json -http H.json [-md OUT]
//	    medians over every file given, the ratios against the targets, and
//	    the Markdown section of docs/PERFORMANCE.md
//	bench-chat record|turn|cache-summary ...
//	    the on-disk prompt cache's measurement (promptcache.go)
//	bench-chat peers -side modeld=H1.json,H2.json -side llama-server=... [-doc F]
//	    servers measured by `bench-chat http` in the same rounds, side by
//	    side, with the ratios against the first and the greedy-text check
//	bench-chat lookup  -model M.gguf -lib DIR [-tokens N -runs N]
//	    decode speed of the engine with prompt lookup off and on, in the same
//	    interleaved runs, on a rewrite and on free text (lookup.go);
//	    bench-chat lookup-md L.json prints its Markdown table
//	bench-chat weights -model M.gguf          (the weights' bytes one decoded token reads)
//	bench-chat load -modeld bin/modeld -model M.gguf -lib ROOT -way NAME=VARIANT[,ENV] ...
//	    starting a runner and loading a model, by phase, several ways in
//	    interleaved rounds (load.go)
//	bench-chat bandwidth [-model-bytes B -decode NAME=TOK_S ...]
//	    the memory bandwidth by a STREAM-style copy and a read at -threads
//	    goroutines (the ceiling's), and decode speeds as a
//	    fraction of bandwidth ÷ bytes per token (bandwidth.go)
//
// Decode speed is (tokens - 1) / (time of the last token - time of the
// first): prompt processing is not in it. Time to first token runs from the
// start of the call (tokenization included) to the first token.
package main

import (
	"encoding/json"
	"fmt"
	"os"
	"slices"
	"strings"
)

func main() {
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: bench-chat engine|http|summary|peers|record|turn|cache-summary|lookup|lookup-md|bandwidth|load|weights|answers [flags]")
		os.Exit(2)
	}
	var err error
	switch os.Args[1] {
	case "engine":
		err = runEngine(os.Args[2:])
	case "http":
		err = runHTTP(os.Args[2:])
	case "summary":
		err = runSummary(os.Args[2:], os.Stdout)
	case "peers":
		err = runPeers(os.Args[2:], os.Stdout)
	case "record":
		err = runRecord(os.Args[2:])
	case "turn":
		err = runTurn(os.Args[2:])
	case "cache-summary":
		err = runCacheSummary(os.Args[2:], os.Stdout)
	case "lookup":
		err = runLookup(os.Args[2:])
	case "lookup-md":
		err = runLookupMarkdown(os.Args[2:])
	case "bandwidth":
		err = runBandwidth(os.Args[2:])
	case "load":
		err = runLoad(os.Args[2:])
	case "weights":
		err = runWeights(os.Args[2:], os.Stdout)
	case "answers":
		err = runAnswers(os.Args[2:])
	default:
		err = fmt.Errorf("unknown subcommand %q (want engine, http, summary, peers, record, turn, cache-summary, lookup, lookup-md, bandwidth, load, weights or answers)", os.Args[1])
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "bench-chat:", err)
		os.Exit(1)
	}
}

// variantWords start the prompts of time-to-first-token runs, one per run,
// so that no run reuses the KV of the previous run's prompt (modeld keeps a
// slot's last prompt and reuses the common prefix).
var variantWords = []string{"Once", "Then", "After", "Before", "While", "Since", "Where", "When", "Because", "Though", "Still", "Again"}

// variant is the prompt of time-to-first-token run i.
func variant(prompt string, i int) string {
	return variantWords[i%len(variantWords)] + " " + prompt
}

// median of xs (the upper one for an even count); 0 for none.
func median(xs []float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	return s[len(s)/2]
}

// decodeRate is tokens/s after the first token: n tokens, the first at
// first (seconds), the last at last.
func decodeRate(n int, first, last float64) float64 {
	if n < 2 || last <= first {
		return 0
	}
	return float64(n-1) / (last - first)
}

func printJSON(v any) error {
	enc := json.NewEncoder(os.Stdout)
	return enc.Encode(v)
}

// listFlag is a flag that may be given several times.
type listFlag []string

func (l *listFlag) String() string     { return strings.Join(*l, ",") }
func (l *listFlag) Set(s string) error { *l = append(*l, s); return nil }
