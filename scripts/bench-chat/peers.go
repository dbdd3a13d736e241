package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/modeld/modeld/internal/perfdoc"
)

// peersHeading is the part of docs/PERFORMANCE.md that `bench-chat peers`
// owns: modeld's HTTP server against llama.cpp's own llama-server.
const peersHeading = "## Chat against llama-server (llama.cpp's own server)"

// side is one server's `bench-chat http` results, a file per round.
type side struct {
	label string
	runs  []httpResult
}

// runPeers compares servers measured by `bench-chat http` in the same
// rounds: -side LABEL=FILE,FILE,... (one file per round, the rounds in the
// same order for every side); ratios are against -base (default: the first
// side).
func runPeers(args []string, w io.Writer) error {
	fs := flag.NewFlagSet("peers", flag.ContinueOnError)
	var sides, loads listFlag
	fs.Var(&sides, "side", "LABEL=FILE,FILE,... (repeat per server)")
	fs.Var(&loads, "load", "load noted before a round (repeat)")
	base := fs.String("base", "", "label the ratios are against (default: the first side)")
	doc := fs.String("doc", "", "update the section of this Markdown file")
	command := fs.String("command", "scripts/bench-chat/servers", "the reproducing command, for the doc")
	heading := fs.String("heading", peersHeading, "the doc's section (a \"## \" heading) to write")
	machine := fs.String("machine", "", "one line describing the machine, for the doc")
	ceiling := fs.Float64("ceiling", 0, "one stream's decode ceiling (tok/s: bandwidth over the bytes a token reads), to put each side's decode against")
	if err := fs.Parse(args); err != nil {
		return err
	}
	var all []side
	for _, s := range sides {
		label, files, ok := strings.Cut(s, "=")
		if !ok || label == "" || files == "" {
			return fmt.Errorf("peers: -side %q is not LABEL=FILE,...", s)
		}
		sd := side{label: label}
		for _, f := range strings.Split(files, ",") {
			var r httpResult
			if err := readJSON(f, &r); err != nil {
				return err
			}
			sd.runs = append(sd.runs, r)
		}
		all = append(all, sd)
	}
	if len(all) < 2 {
		return errors.New("peers: need at least two -side")
	}
	b := 0
	if *base != "" {
		b = -1
		for i, s := range all {
			if s.label == *base {
				b = i
			}
		}
		if b < 0 {
			return fmt.Errorf("peers: -base %q is not a side", *base)
		}
	}
	body := peersMarkdown(*heading, all, b, *command, *machine, loads, *ceiling)
	fmt.Fprintln(w, body)
	if *doc == "" {
		return nil
	}
	old, err := os.ReadFile(*doc)
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return err
	}
	return os.WriteFile(*doc, []byte(perfdoc.UpdateSection(string(old), *heading, body)), 0o644)
}

// measure is one row of the comparison: its name (from the base side's
// first round), its unit, and its values in one round's results.
type measure struct {
	name   func(r httpResult) string
	unit   string
	values func(r httpResult) []float64
}

func fixed(name string) func(httpResult) string { return func(httpResult) string { return name } }

var peerMeasures = []measure{
	{fixed("decode, one stream"), "tok/s", func(r httpResult) []float64 { return r.Decode }},
	{fixed("time to first token"), "ms", func(r httpResult) []float64 { return r.TTFTMs }},
	{func(r httpResult) string { return fmt.Sprintf("%d concurrent streams, aggregate", r.Streams) }, "tok/s",
		func(r httpResult) []float64 { return r.Aggregate }},
	{func(r httpResult) string { return fmt.Sprintf("%d concurrent streams, aggregate", r.WideStreams) }, "tok/s",
		func(r httpResult) []float64 { return r.Wide }},
	{func(r httpResult) string {
		if r.AgentAnswer > 2 || r.AgentGapMs > 0 {
			return fmt.Sprintf("agent loop, per-turn time to first token (%d-token prompt, %d-token answers, %.0f ms between turns)",
				r.AgentPromptTokens, r.AgentAnswer, r.AgentGapMs)
		}
		return fmt.Sprintf("agent loop, per-turn time to first token (%d-token prompt)", r.AgentPromptTokens)
	}, "ms", func(r httpResult) []float64 { return r.AgentTTFTMs }},
	{fixed("inter-chunk gap, median"), "ms", func(r httpResult) []float64 { return []float64{r.GapP50Ms} }},
}

func pool(s side, m measure) []float64 {
	var out []float64
	for _, r := range s.runs {
		out = append(out, m.values(r)...)
	}
	return out
}

func peersMarkdown(heading string, all []side, b int, command, machine string, loads []string, ceiling float64) string {
	var sb strings.Builder
	line := func(format string, args ...any) { fmt.Fprintf(&sb, format+"\n", args...) }
	line("%s", heading)
	line("")
	line("Reproduce: `%s` (%d rounds; each round runs every server in turn, so load from other", command, len(all[b].runs))
	line("processes falls on all of them). Medians over every run of every round; the ratio is")
	line("against %s, per round in brackets.", all[b].label)
	if machine != "" {
		line("Machine: %s.", machine)
	}
	if len(loads) > 0 {
		line("Load before the rounds: %s.", strings.Join(loads, "; "))
	}
	line("")
	head := "| measure |"
	sep := "|---|"
	for _, s := range all {
		head += " " + s.label + " |"
		sep += "---|"
	}
	line("%s", head)
	line("%s", sep)
	for _, m := range peerMeasures {
		baseVals := pool(all[b], m)
		if len(baseVals) == 0 || median(baseVals) == 0 {
			continue
		}
		row := fmt.Sprintf("| %s (%s) |", m.name(all[b].runs[0]), m.unit)
		bm := median(baseVals)
		for i, s := range all {
			v := median(pool(s, m))
			cell := fmt.Sprintf(" %.1f", v)
			if i != b && bm > 0 {
				var rounds []string
				for r := range min(len(s.runs), len(all[b].runs)) {
					if x, y := median(m.values(s.runs[r])), median(m.values(all[b].runs[r])); y > 0 {
						rounds = append(rounds, fmt.Sprintf("%.2f", x/y))
					}
				}
				cell += fmt.Sprintf(" (%.2f× [%s])", v/bm, strings.Join(rounds, " "))
			}
			row += cell + " |"
		}
		line("%s", row)
	}
	line("")
	for i, s := range all {
		if i == b {
			continue
		}
		same := 0
		for r := range min(len(s.runs), len(all[b].runs)) {
			if s.runs[r].Text == all[b].runs[r].Text {
				same++
			}
		}
		line("- Greedy text of %s equal to %s's: %d of %d rounds.", s.label, all[b].label, same, min(len(s.runs), len(all[b].runs)))
	}
	for _, s := range all {
		one, four := median(pool(s, peerMeasures[0])), median(pool(s, peerMeasures[2]))
		if one <= 0 {
			continue
		}
		text := fmt.Sprintf("- %s: %d streams give %.2f× one stream", s.label, s.runs[0].Streams, four/one)
		if ceiling > 0 {
			text += fmt.Sprintf("; one stream decodes at %.2f of the ceiling (%.0f tok/s)", one/ceiling, ceiling)
		}
		line("%s.", text)
	}
	for _, s := range all {
		if r := s.runs[0]; r.AgentPromptTokens > 0 {
			line("- %s's agent loop reused %d of %d prompt tokens per turn.", s.label, r.AgentCached, r.AgentPromptTokens)
		}
	}
	return sb.String()
}
