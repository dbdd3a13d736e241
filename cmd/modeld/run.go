package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/signal"
	"sort"
	"strconv"
	"strings"
	"text/tabwriter"
	"unicode/utf8"

	"github.com/spf13/cobra"
	"golang.org/x/term"
)

func init() {
	extraCommands = append(extraCommands, newRunCommand)
}

func newRunCommand(a *app) *cobra.Command {
	var labels string
	cmd := &cobra.Command{
		Use:   "run MODEL [PROMPT]",
		Short: "Chat with a model in the terminal (or embed, classify, summarize a text)",
		Long: `Chat with MODEL through the daemon serving this home. The answer streams as it
is generated; Ctrl-C stops an answer (the daemon stops generating it), drops
a line being typed, and at an empty prompt, like Ctrl-D, ends the session.
A line ending with \ continues on the next line, and """ starts and ends a
block of several lines.
Type /? for the commands (/set, /show, /clear, /bye).

With PROMPT, or with input that is not a terminal, it answers once and exits.
An embedding model prints the vector's size and first values (all of them
when not on a terminal), a classifier its labels and scores, a summarizer
the summary.`,
		Args: cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx := cmd.Context()
			if ctx == nil {
				ctx = context.Background()
			}
			s, err := a.newRunSession(ctx, args[0])
			if err != nil {
				return err
			}
			if labels != "" {
				s.labels = splitList(labels)
			}
			in, ok := cmd.InOrStdin().(*os.File)
			tty := ok && term.IsTerminal(int(in.Fd()))
			if len(args) > 1 || !tty {
				prompt := strings.Join(args[1:], " ")
				if len(args) == 1 {
					b, err := io.ReadAll(cmd.InOrStdin())
					if err != nil {
						return err
					}
					prompt = strings.TrimSpace(string(b))
				}
				return s.once(ctx, prompt)
			}
			return s.interactive(ctx, in)
		},
	}
	cmd.Flags().StringVar(&labels, "labels", "", "candidate labels for a zero-shot classifier (comma list)")
	return cmd
}

// runSession is one `modeld run`: the model, its settings and the conversation.
type runSession struct {
	a        *app
	base     string
	model    string
	task     string
	out      io.Writer
	tty      bool // out is a terminal: summaries instead of whole vectors
	system   string
	messages []map[string]any
	opts     map[string]any // sampling options sent with every request
	labels   []string       // candidate labels (zero-shot)
	// interrupted is set by a Ctrl-C at the prompt, with whether the line
	// held text then (onKey).
	interrupted, hadText bool
}

// ctrlCKey stands for Ctrl-C in the prompt's input. term.Terminal ends
// ReadLine at a Ctrl-C whatever the line holds; ctrlCReader turns the key
// into this rune and Enter, so that the terminal hands the rune and the
// line to onKey, which clears the line and notes whether it held text: a
// Ctrl-C with text typed drops it and prompts again, one at an empty prompt
// leaves, as Ctrl-D does.
const ctrlCKey = '\ue000'

// ctrlCReader is the terminal's input with each Ctrl-C byte replaced by
// ctrlCKey and Enter.
type ctrlCReader struct {
	r       io.Reader
	pending []byte
	err     error
}

func (c *ctrlCReader) Read(p []byte) (int, error) {
	if len(c.pending) == 0 {
		if c.err != nil {
			return 0, c.err
		}
		buf := make([]byte, max(1, len(p)/4))
		n, err := c.r.Read(buf)
		for _, b := range buf[:n] {
			if b == 3 {
				c.pending = utf8.AppendRune(c.pending, ctrlCKey)
				c.pending = append(c.pending, '\r')
			} else {
				c.pending = append(c.pending, b)
			}
		}
		c.err = err
		if n == 0 {
			return 0, err
		}
	}
	n := copy(p, c.pending)
	c.pending = c.pending[n:]
	return n, nil
}

// onKey is the terminal's key callback: it takes ctrlCKey (see there) and
// leaves every other key to the terminal.
func (s *runSession) onKey(line string, _ int, key rune) (string, int, bool) {
	if key != ctrlCKey {
		return "", 0, false
	}
	s.interrupted, s.hadText = true, line != ""
	return "", 0, true
}

// runOptions are the names /set takes, and the request field and kind of each.
var runOptions = []struct {
	name, field string
	integer     bool
}{
	{"temperature", "temperature", false},
	{"top_p", "top_p", false},
	{"top_k", "top_k", true},
	{"min_p", "min_p", false},
	{"repeat_penalty", "repeat_penalty", false},
	{"seed", "seed", true},
	{"num_predict", "max_tokens", true},
	{"max_tokens", "max_tokens", true},
}

func (a *app) newRunSession(ctx context.Context, model string) (*runSession, error) {
	base, err := a.daemonBase(ctx)
	if err != nil {
		return nil, err
	}
	s := &runSession{a: a, base: base, model: model, out: a.stdout, opts: map[string]any{}}
	if f, ok := a.stdout.(*os.File); ok {
		s.tty = term.IsTerminal(int(f.Fd()))
	}
	var info struct {
		Task string `json:"task"`
	}
	if err := a.daemonCall(ctx, http.MethodGet, "/v1/models/"+model, nil, &info); err != nil {
		return nil, err
	}
	s.task = info.Task
	switch s.task {
	case "chat", "embed", "classify", "zero-shot-classify", "summarize":
	default:
		return nil, fmt.Errorf("model %s serves %s, which modeld run does not drive; use the HTTP API", model, s.task)
	}
	return s, nil
}

// once answers one prompt and returns; Ctrl-C cancels the request.
func (s *runSession) once(ctx context.Context, prompt string) error {
	if prompt == "" {
		return errors.New("no prompt: give one after the model, or on standard input")
	}
	ctx, stop := signal.NotifyContext(ctx, os.Interrupt)
	defer stop()
	err := s.turn(ctx, prompt)
	if ctx.Err() != nil {
		fmt.Fprintln(s.out)
		return exitError{code: 130}
	}
	return err
}

// interactive reads prompts from the terminal until /bye, Ctrl-D or Ctrl-C
// at the prompt.
func (s *runSession) interactive(ctx context.Context, in *os.File) error {
	fd := int(in.Fd())
	t := term.NewTerminal(struct {
		io.Reader
		io.Writer
	}{&ctrlCReader{r: in}, s.out}, ">>> ")
	t.AutoCompleteCallback = s.onKey
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, os.Interrupt)
	defer signal.Stop(sigs)
	fmt.Fprintf(s.out, "%s (%s). Type /? for help, /bye or Ctrl-D to leave.\n", s.model, s.task)
	for {
		prompt, err := s.readPrompt(fd, t)
		if errors.Is(err, io.EOF) {
			fmt.Fprintln(s.out)
			return nil
		}
		if err != nil {
			return err
		}
		prompt = strings.TrimSpace(prompt)
		if prompt == "" {
			continue
		}
		if strings.HasPrefix(prompt, "/") {
			if quit := s.command(ctx, prompt); quit {
				return nil
			}
			continue
		}
		select {
		case <-sigs: // an interrupt from before the question is not for its answer
		default:
		}
		tctx, cancel := context.WithCancel(ctx)
		done := make(chan struct{})
		go func() {
			select {
			case <-sigs:
				cancel()
			case <-done:
			}
		}()
		err = s.turn(tctx, prompt)
		close(done)
		stopped := tctx.Err() != nil
		cancel()
		switch {
		case stopped:
			fmt.Fprintln(s.out, "\n[stopped]")
		case err != nil:
			fmt.Fprintf(s.out, "error: %v\n", err)
		}
	}
}

// readPrompt reads one prompt in raw mode: a line, lines joined by a
// trailing backslash, or a """ block. The terminal is back in its normal
// mode when it returns, so that Ctrl-C during the answer is a signal.
func (s *runSession) readPrompt(fd int, t *term.Terminal) (string, error) {
	old, err := term.MakeRaw(fd)
	if err != nil {
		return "", err
	}
	defer term.Restore(fd, old) //nolint:errcheck // the terminal stays usable either way
	defer t.SetPrompt(">>> ")
	var lines []string
	block := false
	for {
		line, err := t.ReadLine()
		if err != nil {
			return "", err
		}
		if s.interrupted {
			s.interrupted = false
			if !s.hadText && len(lines) == 0 {
				return "", io.EOF // Ctrl-C at an empty prompt leaves
			}
			return "", nil // what was typed is dropped; a new prompt
		}
		switch {
		case block:
			if strings.HasSuffix(line, `"""`) {
				lines = append(lines, strings.TrimSuffix(line, `"""`))
				return strings.Join(lines, "\n"), nil
			}
			lines = append(lines, line)
		case len(lines) == 0 && strings.HasPrefix(line, `"""`):
			rest := strings.TrimPrefix(line, `"""`)
			if strings.HasSuffix(rest, `"""`) && len(rest) >= 3 {
				return strings.TrimSuffix(rest, `"""`), nil
			}
			block = true
			if rest != "" {
				lines = append(lines, rest)
			}
		case strings.HasSuffix(line, `\`):
			lines = append(lines, strings.TrimSuffix(line, `\`))
		default:
			lines = append(lines, line)
			return strings.Join(lines, "\n"), nil
		}
		t.SetPrompt("... ")
	}
}

const runHelp = `Commands:
  /set                 list the settings
  /set NAME VALUE      temperature, top_p, top_k, min_p, repeat_penalty, seed,
                       num_predict (max_tokens); /set NAME alone resets it
  /set system TEXT     the system prompt (/set system alone removes it)
  /set labels A,B      candidate labels of a zero-shot classifier
  /show                the model's details
  /clear               forget the conversation
  /bye                 leave (also Ctrl-D, or Ctrl-C at an empty prompt)
Ctrl-C while an answer streams stops it. A line ending with \ continues on
the next line; """ starts and ends a block of several lines.
`

// command runs a /command; quit is true for /bye.
func (s *runSession) command(ctx context.Context, line string) (quit bool) {
	f := strings.Fields(line)
	switch f[0] {
	case "/bye", "/exit", "/quit":
		return true
	case "/?", "/help":
		fmt.Fprint(s.out, runHelp)
	case "/clear":
		s.messages = nil
		fmt.Fprintln(s.out, "the conversation is cleared")
	case "/show":
		if err := s.show(ctx); err != nil {
			fmt.Fprintf(s.out, "error: %v\n", err)
		}
	case "/set":
		rest := strings.TrimSpace(strings.TrimPrefix(line, "/set"))
		if err := s.set(rest); err != nil {
			fmt.Fprintf(s.out, "error: %v\n", err)
		}
	default:
		fmt.Fprintf(s.out, "unknown command %s; /? lists the commands\n", f[0])
	}
	return false
}

// set applies "/set NAME VALUE" (or lists the settings when rest is empty).
func (s *runSession) set(rest string) error {
	if rest == "" {
		tw := tabwriter.NewWriter(s.out, 0, 0, 2, ' ', 0)
		keys := make([]string, 0, len(s.opts))
		for k := range s.opts {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			fmt.Fprintf(tw, "%s\t%v\n", k, s.opts[k])
		}
		if len(keys) == 0 {
			fmt.Fprintln(tw, "sampling\tthe model's defaults")
		}
		fmt.Fprintf(tw, "system\t%s\n", orDash(s.system))
		if len(s.labels) > 0 {
			fmt.Fprintf(tw, "labels\t%s\n", strings.Join(s.labels, ", "))
		}
		return tw.Flush()
	}
	name, value, _ := strings.Cut(rest, " ")
	value = strings.TrimSpace(value)
	switch name {
	case "system":
		s.system = value
		if value == "" {
			fmt.Fprintln(s.out, "system prompt removed")
		} else {
			fmt.Fprintln(s.out, "system prompt set")
		}
		return nil
	case "labels":
		s.labels = splitList(value)
		fmt.Fprintf(s.out, "labels: %s\n", strings.Join(s.labels, ", "))
		return nil
	}
	for _, o := range runOptions {
		if o.name != name {
			continue
		}
		if value == "" {
			delete(s.opts, o.field)
			fmt.Fprintf(s.out, "%s reset to the model's default\n", name)
			return nil
		}
		if o.integer {
			n, err := strconv.ParseInt(value, 10, 64)
			if err != nil {
				return fmt.Errorf("%s takes a whole number, not %q", name, value)
			}
			s.opts[o.field] = n
		} else {
			x, err := strconv.ParseFloat(value, 64)
			if err != nil {
				return fmt.Errorf("%s takes a number, not %q", name, value)
			}
			s.opts[o.field] = x
		}
		fmt.Fprintf(s.out, "%s = %s\n", name, value)
		return nil
	}
	return fmt.Errorf("unknown setting %q; /set lists them, /? explains", name)
}

// show prints the model's details from GET /v1/models/{id}.
func (s *runSession) show(ctx context.Context) error {
	var m struct {
		ID             string   `json:"id"`
		Tasks          []string `json:"tasks"`
		Format         string   `json:"format"`
		SizeBytes      int64    `json:"size_bytes"`
		ContextLength  uint64   `json:"context_length"`
		TrainedContext uint64   `json:"trained_context_length"`
		Quantization   string   `json:"quantization"`
		GGUF           *struct {
			Architecture string `json:"architecture"`
			Parameters   uint64 `json:"parameters"`
		} `json:"gguf"`
		ONNX *struct {
			ModelType string   `json:"model_type"`
			Labels    []string `json:"labels"`
		} `json:"onnx"`
	}
	if err := s.a.daemonCall(ctx, http.MethodGet, "/v1/models/"+s.model, nil, &m); err != nil {
		return err
	}
	tw := tabwriter.NewWriter(s.out, 0, 0, 2, ' ', 0)
	row := func(k, v string) {
		if v != "" && v != "0" {
			fmt.Fprintf(tw, "%s\t%s\n", k, v)
		}
	}
	row("model", m.ID)
	row("tasks", strings.Join(m.Tasks, ", "))
	row("format", m.Format)
	row("size", humanBytes(m.SizeBytes))
	row("context", strconv.FormatUint(m.ContextLength, 10))
	row("trained context", strconv.FormatUint(m.TrainedContext, 10))
	row("quantization", m.Quantization)
	if m.GGUF != nil {
		row("architecture", m.GGUF.Architecture)
		row("parameters", humanCount(m.GGUF.Parameters))
	}
	if m.ONNX != nil {
		row("model type", m.ONNX.ModelType)
		row("labels", strings.Join(m.ONNX.Labels, ", "))
	}
	return tw.Flush()
}

// turn sends one prompt and prints the answer.
func (s *runSession) turn(ctx context.Context, prompt string) error {
	switch s.task {
	case "chat":
		return s.chat(ctx, prompt)
	case "embed":
		return s.embed(ctx, prompt)
	case "summarize":
		var out struct {
			Data []struct {
				SummaryText string `json:"summary_text"`
			} `json:"data"`
		}
		if err := s.a.daemonCall(ctx, http.MethodPost, "/v1/summarize", map[string]any{"model": s.model, "input": prompt}, &out); err != nil {
			return err
		}
		for _, d := range out.Data {
			fmt.Fprintln(s.out, d.SummaryText)
		}
		return nil
	}
	return s.classify(ctx, prompt)
}

func (s *runSession) classify(ctx context.Context, prompt string) error {
	body := map[string]any{"model": s.model, "input": prompt, "top_k": -1} // every label
	if len(s.labels) > 0 {
		body["candidate_labels"] = s.labels
	}
	var out struct {
		Data []struct {
			Labels []struct {
				Label string  `json:"label"`
				Score float64 `json:"score"`
			} `json:"labels"`
		} `json:"data"`
	}
	if err := s.a.daemonCall(ctx, http.MethodPost, "/v1/classify", body, &out); err != nil {
		return err
	}
	tw := tabwriter.NewWriter(s.out, 0, 0, 2, ' ', 0)
	for _, d := range out.Data {
		for _, l := range d.Labels {
			fmt.Fprintf(tw, "%s\t%.4f\n", l.Label, l.Score)
		}
	}
	return tw.Flush()
}

func (s *runSession) embed(ctx context.Context, prompt string) error {
	var out struct {
		Data []struct {
			Embedding []float64 `json:"embedding"`
		} `json:"data"`
	}
	if err := s.a.daemonCall(ctx, http.MethodPost, "/v1/embeddings", map[string]any{"model": s.model, "input": prompt}, &out); err != nil {
		return err
	}
	for _, d := range out.Data {
		if !s.tty {
			b, err := json.Marshal(d.Embedding)
			if err != nil {
				return err
			}
			fmt.Fprintln(s.out, string(b))
			continue
		}
		var head []string
		for i, x := range d.Embedding {
			if i == 6 {
				head = append(head, "…")
				break
			}
			head = append(head, strconv.FormatFloat(x, 'f', 4, 64))
		}
		fmt.Fprintf(s.out, "[%s] (%d dimensions)\n", strings.Join(head, ", "), len(d.Embedding))
	}
	return nil
}

// chat streams one chat turn and keeps it in the conversation. A stopped
// or failed turn leaves the conversation as it was.
func (s *runSession) chat(ctx context.Context, prompt string) error {
	msgs := make([]map[string]any, 0, len(s.messages)+2)
	if s.system != "" {
		msgs = append(msgs, map[string]any{"role": "system", "content": s.system})
	}
	msgs = append(msgs, s.messages...)
	msgs = append(msgs, map[string]any{"role": "user", "content": prompt})
	body := map[string]any{"model": s.model, "messages": msgs, "stream": true}
	for k, v := range s.opts {
		body[k] = v
	}
	b, err := json.Marshal(body)
	if err != nil {
		return err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, s.base+"/v1/chat/completions", bytes.NewReader(b))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	s.a.authorize(req)
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer res.Body.Close() //nolint:errcheck // read below
	if res.StatusCode != http.StatusOK {
		eb, _ := io.ReadAll(io.LimitReader(res.Body, 1<<20))
		return daemonErrorOf(res.StatusCode, eb)
	}
	var answer strings.Builder
	sc := bufio.NewScanner(res.Body)
	sc.Buffer(make([]byte, 64<<10), 16<<20)
	for sc.Scan() {
		data, ok := strings.CutPrefix(sc.Text(), "data: ")
		if !ok {
			continue
		}
		if data == "[DONE]" {
			break
		}
		var ev struct {
			Choices []struct {
				Delta struct {
					Content string `json:"content"`
				} `json:"delta"`
			} `json:"choices"`
			Error *struct {
				Message string `json:"message"`
			} `json:"error"`
		}
		if err := json.Unmarshal([]byte(data), &ev); err != nil {
			return fmt.Errorf("the daemon sent an unreadable event: %w", err)
		}
		if ev.Error != nil {
			fmt.Fprintln(s.out)
			return errors.New(ev.Error.Message)
		}
		for _, c := range ev.Choices {
			answer.WriteString(c.Delta.Content)
			fmt.Fprint(s.out, c.Delta.Content)
		}
	}
	if err := sc.Err(); err != nil {
		return err
	}
	fmt.Fprintln(s.out)
	s.messages = append(s.messages, map[string]any{"role": "user", "content": prompt},
		map[string]any{"role": "assistant", "content": answer.String()})
	return nil
}
