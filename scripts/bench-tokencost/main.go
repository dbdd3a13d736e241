// Command bench-tokencost accounts for what one streamed token costs each
// process of modeld, in CPU time and context switches, against llama.cpp
// called directly on the same model and threads. CPU time is read from
// /proc/PID/task/*/schedstat (nanoseconds on a core, spinning included)
// and context switches from /proc/PID/task/*/status, around the decode
// part of each stream (first token to last), so the figures hold on a
// loaded machine where wall-clock speeds do not.
//
//	bench-tokencost local -model M.gguf -lib LIBROOT -modeld bin/modeld   # direct, engine, runner
//	bench-tokencost http -url URL -name ID -daemon PID                    # modeld serve
//	bench-tokencost summary -local L.json -http H.json [-bench B.txt] [-doc docs/PERFORMANCE.md]
//
// scripts/bench-tokencost/run drives the three.
package main

import (
	"encoding/json"
	"fmt"
	"os"
	"slices"
)

func main() {
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: bench-tokencost local|http|summary [flags]")
		os.Exit(2)
	}
	var err error
	switch os.Args[1] {
	case "local":
		err = runLocal(os.Args[2:])
	case "http":
		err = runHTTP(os.Args[2:])
	case "summary":
		err = runSummary(os.Args[2:])
	default:
		err = fmt.Errorf("unknown command %q (want local, http or summary)", os.Args[1])
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "bench-tokencost:", err)
		os.Exit(1)
	}
}

// run is one stream's decode part as each measured process saw it.
type run struct {
	Tokens int        `json:"tokens"` // decode steps measured (tokens after the first)
	WallNs int64      `json:"wallNs"`
	Procs  []procCost `json:"procs"`
}

// layer is one way of calling llama.cpp and the processes measured in it.
type layer struct {
	Name  string   `json:"name"`
	Procs []string `json:"procs"` // what each entry of run.Procs is
	Runs  []run    `json:"runs"`
}

type result struct {
	Threads int     `json:"threads"`
	Tokens  int     `json:"tokens"`
	Layers  []layer `json:"layers"`
	// Idle is the runner and the daemon at rest (no stream) for a while.
	Idle  *run   `json:"idle,omitempty"`
	Label string `json:"label,omitempty"`
}

func printJSON(v any) error {
	enc := json.NewEncoder(os.Stdout)
	enc.SetIndent("", " ")
	return enc.Encode(v)
}

// perToken is the median over runs of f(run) / tokens.
func perToken(runs []run, f func(run) float64) float64 {
	xs := make([]float64, 0, len(runs))
	for _, r := range runs {
		if r.Tokens > 0 {
			xs = append(xs, f(r)/float64(r.Tokens))
		}
	}
	return median(xs)
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
