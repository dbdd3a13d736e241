package gatewaytest

import (
	"context"
	"fmt"
	"io"
	"time"
)

// AgentWorkload is the load model's trace for n hosts: six agents' users
// per host, on six models whose popularity falls off as Zipf's law
// (s = 1.3: the first model gets about half the users), each user a
// conversation of eight turns over a 2,000-token shared system prompt.
func AgentWorkload(n int) Workload {
	return Workload{Users: 6 * n, Turns: 8, Models: 6, Zipf: 1.3, SystemTokens: 2000, TurnTokens: 300,
		OutputTokens: 150, Think: 2 * time.Second, Seed: 25}
}

// AgentHost is the load model's host: two models loaded at once with four
// slots each, eight conversations kept per model, a 20 s load, and a
// CPU-class speed.
var AgentHost = HostModel{MaxModels: 2, Slots: 4, KeptPerModel: 8, LoadTime: 20 * time.Second,
	PrefillPerSec: 1500, DecodePerSec: 25}

// Routings are the three ways the load model routes: the picker of
// docs/SCALING.md, the same without model affinity, and random.
var Routings = []struct {
	Name   string
	Config []byte
}{
	{"picker, model affinity", ModeldConfig},
	{"picker, no affinity", NoAffinity(ModeldConfig)},
	{"random", RandomConfig},
}

// LoadModel runs the agent workload over each of hosts with each routing
// and writes a Markdown table to w.
func LoadModel(ctx context.Context, w io.Writer, hosts ...int) error {
	fmt.Fprintln(w, "| hosts | users | routing | queue mean | queue p95 | prefix-cache hit | model loads |")
	fmt.Fprintln(w, "|---|---|---|---|---|---|---|")
	for _, n := range hosts {
		wl := AgentWorkload(n)
		for _, r := range Routings {
			res, err := Simulate(ctx, r.Config, n, AgentHost, wl)
			if err != nil {
				return fmt.Errorf("%d hosts, %s: %w", n, r.Name, err)
			}
			fmt.Fprintf(w, "| %d | %d | %s | %.1f s | %.1f s | %.0f %% | %d |\n", n, wl.Users, r.Name,
				res.QueueMean.Seconds(), res.QueueP95.Seconds(), 100*res.CacheHit, res.Loads)
		}
	}
	return nil
}
