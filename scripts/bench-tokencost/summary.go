package main

import (
	"bufio"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"
)

// section is the heading of the part of docs/PERFORMANCE.md -doc rewrites.
const section = "### Per-token cost"

type listFlag []string

func (l *listFlag) String() string     { return strings.Join(*l, ",") }
func (l *listFlag) Set(s string) error { *l = append(*l, s); return nil }

func runSummary(args []string) error {
	fs := flag.NewFlagSet("summary", flag.ContinueOnError)
	var inputs listFlag
	fs.Var(&inputs, "in", "JSON of local or http (repeatable)")
	bench := fs.String("bench", "", "output of the per-token go test benchmarks")
	load := fs.String("load", "", "the machine's load while measuring, in words")
	machine := fs.String("machine", "", "the machine, in words")
	doc := fs.String("doc", "", "rewrite the "+section+" section of this file")
	before := fs.String("before", "", "a markdown block kept above the figures (the breakdown before a change)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	var layers []layer
	type labelled struct {
		label string
		idle  *run
	}
	var idles []labelled
	threads, tokens := 0, 0
	for _, in := range inputs {
		b, err := os.ReadFile(in)
		if err != nil {
			return err
		}
		var r result
		if err := json.Unmarshal(b, &r); err != nil {
			return fmt.Errorf("%s: %w", in, err)
		}
		for _, l := range r.Layers { // runs of one layer from several files merge
			if i := slices.IndexFunc(layers, func(x layer) bool { return x.Name == l.Name }); i >= 0 {
				layers[i].Runs = append(layers[i].Runs, l.Runs...)
			} else {
				layers = append(layers, l)
			}
		}
		if r.Idle != nil {
			idles = append(idles, labelled{r.Label, r.Idle})
		}
		threads, tokens = r.Threads, r.Tokens
	}
	if len(layers) == 0 {
		return errors.New("summary: no -in")
	}
	var out strings.Builder
	out.WriteString("| layer | process | CPU µs/token | compute threads | other threads | exited threads | other threads' wake-ups/token | " +
		"compute threads' switches/token (voluntary, involuntary) | threads | wall µs/token |\n")
	out.WriteString("|---|---|---|---|---|---|---|---|---|---|\n")
	var direct float64
	type own struct {
		name       string
		cpu, other float64
		wake       float64
	}
	var owns []own
	for _, l := range layers {
		for i, name := range l.Procs {
			per := func(f func(p procCost) int64, scale float64) float64 {
				return perToken(l.Runs, func(r run) float64 { return float64(f(r.Procs[i])) / scale })
			}
			cpu := per(func(p procCost) int64 { return p.CPUNs + p.ExitedCPUNs }, 1e3)
			exited := per(func(p procCost) int64 { return p.ExitedCPUNs }, 1e3)
			comp := per(func(p procCost) int64 { return p.ComputeCPUNs }, 1e3)
			other := per(func(p procCost) int64 { return p.CPUNs - p.ComputeCPUNs }, 1e3)
			wake := per(func(p procCost) int64 { return p.Vol - p.ComputeVol }, 1)
			cvol := per(func(p procCost) int64 { return p.ComputeVol }, 1)
			cinv := per(func(p procCost) int64 { return p.ComputeInvol }, 1)
			threads := 0
			for _, r := range l.Runs {
				threads = max(threads, r.Procs[i].Threads)
			}
			wall := perToken(l.Runs, func(r run) float64 { return float64(r.WallNs) / 1e3 })
			var computeCols string
			if i == 0 {
				computeCols = fmt.Sprintf("%.0f | %.0f", comp, other)
			} else {
				computeCols = fmt.Sprintf("– | %.0f", other)
			}
			switches := "–"
			if i == 0 {
				switches = fmt.Sprintf("%.2f, %.2f", cvol, cinv)
			}
			fmt.Fprintf(&out, "| %s | %s | %.0f | %s | %.0f | %.2f | %s | %d | %.0f |\n",
				l.Name, name, cpu, computeCols, exited, wake, switches, threads, wall)
			if strings.HasPrefix(l.Name, "llama.cpp direct") {
				direct = cpu
			}
			if strings.HasPrefix(l.Name, "modeld serve") && name != "client" {
				if len(owns) == 0 || owns[len(owns)-1].name != l.Name {
					owns = append(owns, own{name: l.Name})
				}
				o := &owns[len(owns)-1]
				o.cpu += cpu
				o.other += other
				o.wake += wake
			}
		}
	}
	out.WriteString("\n")
	for _, o := range owns {
		fmt.Fprintf(&out, "%s: runner and daemon %.0f µs of CPU per token", o.name, o.cpu)
		if direct > 0 {
			fmt.Fprintf(&out, " (llama.cpp direct: %.0f)", direct)
		}
		fmt.Fprintf(&out, "; their threads other than ggml's compute threads %.0f µs and %.1f wake-ups per token.\n", o.other, o.wake)
	}
	for _, il := range idles {
		idle := il.idle
		if idle.WallNs <= 0 {
			continue
		}
		sec := float64(idle.WallNs) / 1e9
		label := ""
		if il.label != "" {
			label = " (" + il.label + ")"
		}
		fmt.Fprintf(&out, "\nAt rest%s (no stream, %.0f s), per second: runner %.0f µs of CPU and %.0f wake-ups, daemon %.0f µs and %.0f wake-ups.\n",
			label, sec, float64(idle.Procs[0].CPUNs+idle.Procs[0].ExitedCPUNs)/1e3/sec, float64(idle.Procs[0].Vol)/sec,
			float64(idle.Procs[1].CPUNs)/1e3/sec, float64(idle.Procs[1].Vol)/sec)
	}
	if *bench != "" {
		t, err := benchTable(*bench)
		if err != nil {
			fmt.Fprintln(os.Stderr, "bench-tokencost: no benchmark table:", err)
		} else {
			out.WriteString("\n" + t)
		}
	}
	fmt.Fprintf(&out, "\nSettings: %d threads for one-token steps, %d tokens per stream (the first token's step and the prompt are not counted), "+
		"medians over %d streams per layer, interleaved.", threads, tokens, len(layers[0].Runs))
	if *machine != "" {
		fmt.Fprintf(&out, " Machine: %s.", *machine)
	}
	if *load != "" {
		fmt.Fprintf(&out, " Load while measuring: %s.", *load)
	}
	out.WriteString("\n")
	fmt.Print(out.String())
	if *doc == "" {
		return nil
	}
	body := "\n" + out.String()
	if *before != "" {
		b, err := os.ReadFile(*before)
		if err != nil {
			return err
		}
		body = "\n" + strings.TrimSpace(string(b)) + "\n" + body
	}
	return rewriteDoc(*doc, body)
}

// benchTable renders go test -bench output lines as a table.
func benchTable(path string) (string, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", err
	}
	defer f.Close()
	var b strings.Builder
	b.WriteString("| benchmark (go test -bench, per token) | ns | bytes | allocations |\n|---|---|---|---|\n")
	sc := bufio.NewScanner(f)
	pkg, pending := "", ""
	n := 0
	for sc.Scan() {
		fl := strings.Fields(sc.Text())
		if len(fl) == 2 && fl[0] == "pkg:" {
			pkg = strings.TrimPrefix(fl[1], "github.com/modeld/modeld/")
		}
		// A benchmark's log lines may split its name from its figures.
		if len(fl) > 0 && strings.HasPrefix(fl[0], "Benchmark") {
			pending = fl[0]
			if len(fl) < 4 {
				continue
			}
			fl = fl[1:]
		} else if pending == "" || len(fl) < 3 {
			continue
		}
		if _, err := strconv.Atoi(fl[0]); err != nil {
			continue
		}
		name := pending
		pending = ""
		fl = append([]string{name}, fl...)
		// N, then value-unit pairs; a per-token metric wins over per-op.
		units := map[string]string{}
		for i := 2; i+1 < len(fl); i += 2 {
			units[fl[i+1]] = fl[i]
		}
		pick := func(unit string) string {
			if v, ok := units[unit+"/token"]; ok {
				return v
			}
			return units[unit+"/op"]
		}
		if i := strings.LastIndexByte(name, '-'); i > 0 {
			name = name[:i]
		}
		fmt.Fprintf(&b, "| %s `%s` | %s | %s | %s |\n", pkg, name, pick("ns"), pick("B"), pick("allocs"))
		n++
	}
	if n == 0 {
		return "", fmt.Errorf("%s: no benchmark lines", path)
	}
	return b.String(), sc.Err()
}

// endMarker ends the figures -doc writes; what follows it up to the next
// heading (the reading of the figures, written by hand) is kept.
const endMarker = "<!-- end of bench-tokencost figures -->"

// rewriteDoc replaces the section (up to endMarker, else up to the next
// heading of its level or above) with body, or adds it at the end of the
// Chat part.
func rewriteDoc(path, body string) error {
	b, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	doc := string(b)
	text := section + "\n" + body + "\n_Measured " + time.Now().UTC().Format("2006-01-02") + "._\n" + endMarker + "\n"
	if i := strings.Index(doc, "\n"+section+"\n"); i >= 0 {
		rest := doc[i+1+len(section)+1:]
		end := len(rest)
		for _, h := range []string{"\n### ", "\n## "} {
			if j := strings.Index(rest, h); j >= 0 && j < end {
				end = j
			}
		}
		if j := strings.Index(rest[:end], endMarker); j >= 0 {
			doc = doc[:i+1] + text + strings.TrimPrefix(rest[j+len(endMarker):], "\n")
		} else {
			doc = doc[:i+1] + text + "\n" + strings.TrimLeft(rest[end:], "\n")
		}
	} else {
		i := strings.Index(doc, "\n## Task pipelines")
		if i < 0 {
			return fmt.Errorf("%s: no %q section and no \"## Task pipelines\" to put it before", path, section)
		}
		doc = doc[:i+1] + text + "\n" + doc[i+1:]
	}
	return os.WriteFile(path, []byte(doc), 0o644)
}
