package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/modeld/modeld/backends/llama"
	"github.com/modeld/modeld/backends/llama/engine"
)

// The agent loop whose next turn repeats the last answer, in token ids:
// each turn's prompt is the last one's, the answer's ids as generated, and
// a short tool result. Ids, not text, so that what is measured is the
// reuse of the answer's KV, not whether a random-weight model's text
// tokenizes back to the ids it chose (a trained model's mostly does; a
// random one's seldom, which would hide the answer from every server
// alike). modeld's engine runs in this process, once with
// Options.ReuseAnswers and once without; llama-server, when given, gets
// the same loop through its /completion endpoint, which takes ids, with
// its prompt cache on.

type answersParams struct {
	model, libRoot, server string
	prompt                 string
	threads, ctx, slots    int
	turns, answer, rounds  int
	gap                    time.Duration
	md                     bool
}

// answerSide is one server's turns: time to first token of each timed
// turn, and how many of its prompt tokens it reused.
type answerSide struct {
	Label        string    `json:"label"`
	TTFTMs       []float64 `json:"ttftMs"`
	Cached       []int     `json:"cached"`
	PromptTokens []int     `json:"promptTokens"`
	// ServerPromptMs is llama-server's own prompt_ms of each turn (the
	// evaluation without the HTTP round trip).
	ServerPromptMs []float64 `json:"serverPromptMs,omitempty"`
	// Answers are the first round's answers, to compare between sides.
	Answers [][]int32 `json:"answers"`
}

func runAnswers(args []string) error {
	fs := flag.NewFlagSet("answers", flag.ContinueOnError)
	var p answersParams
	fs.StringVar(&p.model, "model", "", "GGUF model (required)")
	fs.StringVar(&p.libRoot, "lib", "", "runtime-library root with llama/ inside (required)")
	fs.StringVar(&p.server, "server", "", "llama-server base URL serving the same model (empty: none)")
	fs.StringVar(&p.prompt, "prompt", "", "the conversation's first prompt, text (required)")
	fs.IntVar(&p.threads, "threads", 2, "threads")
	fs.IntVar(&p.ctx, "ctx", 4096, "context of one sequence")
	fs.IntVar(&p.slots, "slots", 4, "engine slots")
	fs.IntVar(&p.turns, "turns", 8, "timed turns per round (after one untimed)")
	fs.IntVar(&p.answer, "answer", 64, "tokens of each answer")
	fs.IntVar(&p.rounds, "rounds", 2, "rounds; each runs every side in turn")
	fs.DurationVar(&p.gap, "gap", 500*time.Millisecond, "pause between turns (the agent running its tool)")
	fs.BoolVar(&p.md, "md", false, "print a markdown table instead of JSON")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if p.model == "" || p.libRoot == "" || p.prompt == "" {
		return errors.New("answers: -model, -lib and -prompt are required")
	}
	slog.SetDefault(slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn})))
	if err := engine.Init(filepath.Join(p.libRoot, "llama")); err != nil {
		return err
	}
	sides := []*answerSide{{Label: "modeld, answers reused"}, {Label: "modeld, answers not reused"}}
	if p.server != "" {
		sides = append(sides, &answerSide{Label: "llama-server"})
	}
	for r := 0; r < p.rounds; r++ {
		for i, s := range sides {
			var err error
			switch i {
			case 0, 1:
				err = p.engineLoop(s, i == 0, r == 0)
			default:
				err = p.serverLoop(s, r == 0)
			}
			if err != nil {
				return fmt.Errorf("%s: %w", s.Label, err)
			}
			fmt.Fprintf(os.Stderr, "answers: round %d/%d: %s: median %.1f ms\n", r+1, p.rounds, s.Label, median(s.TTFTMs))
		}
	}
	if p.md {
		fmt.Print(answersMarkdown(sides))
		return nil
	}
	return printJSON(sides)
}

// answersMarkdown is the table of the sides' medians, each against the
// first side's, and whether their answers agree.
func answersMarkdown(sides []*answerSide) string {
	var b strings.Builder
	base := median(sides[0].TTFTMs)
	b.WriteString("| side | time to first token, median (ms) | × modeld, answers reused | prompt tokens reused per turn, median |\n|---|---:|---:|---:|\n")
	for _, s := range sides {
		cached := make([]float64, len(s.Cached))
		for i, c := range s.Cached {
			cached[i] = float64(c)
		}
		prompt := make([]float64, len(s.PromptTokens))
		for i, n := range s.PromptTokens {
			prompt[i] = float64(n)
		}
		fmt.Fprintf(&b, "| %s | %.1f | %.2f× | %.0f of %.0f |\n", s.Label, median(s.TTFTMs), median(s.TTFTMs)/base, median(cached), median(prompt))
	}
	for _, s := range sides[1:] {
		same := 0
		for i := range min(len(s.Answers), len(sides[0].Answers)) {
			if slices.Equal(s.Answers[i], sides[0].Answers[i]) {
				same++
			}
		}
		fmt.Fprintf(&b, "\n- %s: %d of %d answers equal to modeld's with answers reused.", s.Label, same, len(sides[0].Answers))
		if len(s.ServerPromptMs) > 0 {
			fmt.Fprintf(&b, " Its own prompt_ms per turn, median: %.1f ms.", median(s.ServerPromptMs))
		}
	}
	b.WriteString("\n")
	return b.String()
}

// conversation is the loop's first prompt and the ids of each turn's tool result.
func (p answersParams) conversation(m *engine.Model) (first []int32, tool func(int) []int32, err error) {
	first, err = m.Tokenize(p.prompt, true, false)
	if err != nil {
		return nil, nil, err
	}
	tool = func(turn int) []int32 {
		ids, err := m.Tokenize(fmt.Sprintf("\nTool result %d: ok.\n", turn), false, false)
		if err != nil {
			panic(fmt.Sprintf("tokenize a tool result: %v", err))
		}
		return ids
	}
	return first, tool, nil
}

// answerTurn is one turn as a side answered it.
type answerTurn struct {
	ids      []int32
	ttft     time.Duration
	cached   int
	serverMs float64 // llama-server's prompt_ms (0: the engine)
}

// loop runs the agent loop with turn answering each prompt: the untimed
// first turn, then p.turns timed ones, each p.gap after the last answer.
// m tokenizes the conversation (the same vocabulary on every side).
func (p answersParams) loop(m *engine.Model, s *answerSide, keep bool, turn func(conv []int32) (answerTurn, error)) error {
	conv, tool, err := p.conversation(m)
	if err != nil {
		return err
	}
	for t := 0; t <= p.turns; t++ {
		if t > 0 {
			time.Sleep(p.gap)
		}
		conv = append(conv, tool(t)...)
		r, err := turn(conv)
		if err != nil {
			return fmt.Errorf("turn %d: %w", t, err)
		}
		if len(r.ids) != p.answer {
			return fmt.Errorf("turn %d: %d tokens, want %d", t, len(r.ids), p.answer)
		}
		if t > 0 {
			s.TTFTMs = append(s.TTFTMs, ms(r.ttft))
			s.Cached = append(s.Cached, r.cached)
			s.PromptTokens = append(s.PromptTokens, len(conv))
			if r.serverMs > 0 {
				s.ServerPromptMs = append(s.ServerPromptMs, r.serverMs)
			}
			if keep {
				s.Answers = append(s.Answers, r.ids)
			}
		}
		conv = append(conv, r.ids...)
	}
	return nil
}

func (p answersParams) engineLoop(s *answerSide, reuse, keep bool) error {
	m, err := engine.Open(p.model, llama.Options{Slots: p.slots, Threads: p.threads, ContextSize: p.ctx, ReuseAnswers: reuse})
	if err != nil {
		return err
	}
	defer m.Close()
	return p.loop(m, s, keep, func(conv []int32) (r answerTurn, err error) {
		start := time.Now()
		ch, err := m.Generate(context.Background(), llama.Request{Prompt: conv, MaxTokens: p.answer})
		if err != nil {
			return r, err
		}
		var final llama.Event
		for ev := range ch {
			if ev.Done {
				final = ev
				continue
			}
			if r.ids == nil {
				r.ttft = time.Since(start)
			}
			r.ids = append(r.ids, ev.Token)
		}
		if final.Err != nil {
			return r, final.Err
		}
		if final.Finish != llama.FinishLength {
			return r, fmt.Errorf("finished with %q after %d tokens, want %d", final.Finish, len(r.ids), p.answer)
		}
		r.cached = final.Usage.CachedTokens
		return r, nil
	})
}

// serverLoop runs the loop against llama-server's /completion, whose
// prompt may be ids; the conversation is tokenized by the engine (the
// same vocabulary).
func (p answersParams) serverLoop(s *answerSide, keep bool) error {
	m, err := engine.Open(p.model, llama.Options{Slots: 1, Threads: 1, ContextSize: 256})
	if err != nil {
		return err
	}
	defer m.Close()
	c := &http.Client{}
	return p.loop(m, s, keep, func(conv []int32) (r answerTurn, err error) {
		body, _ := json.Marshal(map[string]any{"prompt": conv, "n_predict": p.answer, "temperature": 0,
			"cache_prompt": true, "stream": true, "return_tokens": true})
		start := time.Now()
		resp, err := c.Post(strings.TrimRight(p.server, "/")+"/completion", "application/json", bytes.NewReader(body))
		if err != nil {
			return r, err
		}
		defer resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			return r, fmt.Errorf("POST /completion: %s", resp.Status)
		}
		sc := bufio.NewScanner(resp.Body)
		sc.Buffer(make([]byte, 1<<20), 1<<24)
		for sc.Scan() {
			line, ok := strings.CutPrefix(sc.Text(), "data: ")
			if !ok {
				continue
			}
			var ev struct {
				Tokens  []int32 `json:"tokens"`
				Stop    bool    `json:"stop"`
				Timings struct {
					CacheN   int     `json:"cache_n"`
					PromptMs float64 `json:"prompt_ms"`
				} `json:"timings"`
			}
			if err := json.Unmarshal([]byte(line), &ev); err != nil {
				return r, fmt.Errorf("event %q: %w", line, err)
			}
			if len(ev.Tokens) > 0 && r.ids == nil {
				r.ttft = time.Since(start)
			}
			r.ids = append(r.ids, ev.Tokens...)
			if ev.Stop {
				r.cached, r.serverMs = ev.Timings.CacheN, ev.Timings.PromptMs
			}
		}
		return r, sc.Err()
	})
}
