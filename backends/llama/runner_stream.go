package llama

import (
	"github.com/modeld/modeld/backends/llama/wire"

	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
)

// engineAPI is the method set a Runner shares with the engine's Model
// (engine.Model, which a test checks), so callers can hold either.
type engineAPI interface {
	Info() Info
	Tokenize(text string, addSpecial, parseSpecial bool) ([]int32, error)
	Detokenize(ids []int32, renderSpecial bool) (string, error)
	TokenPiece(id int32, renderSpecial bool) (string, error)
	ApplyChatTemplate(msgs []Message, addAssistant bool) (string, error)
	ChatPrompt(msgs []Message, tools []Tool, addAssistant bool) ([]int32, error)
	Generate(ctx context.Context, req Request) (<-chan Event, error)
	Stats() Stats
	Close() error
}

var _ engineAPI = (*Runner)(nil)

// Generate is Model.Generate, in the runner: the same errors before the
// stream starts, the same events, and the stream must likewise be read to
// its end. Cancelling ctx closes the connection, which stops the sequence
// in the runner within one decode step; the stream then ends with a
// FinishCancelled event (its usage counts the tokens received). If the
// runner dies mid-stream, the last event has FinishError and an Err
// wrapping ErrRunnerExited with the runner's stderr tail.
func (r *Runner) Generate(ctx context.Context, req Request) (<-chan Event, error) {
	if err := r.alive(); err != nil {
		return nil, err
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if err := r.resolvePrompt(ctx, &req); err != nil {
		return nil, err
	}
	body, err := json.Marshal(wire.FromRequest(req))
	if err != nil {
		return nil, fmt.Errorf("%w: the request cannot be encoded: %w", ErrInvalidRequest, err)
	}
	hreq, err := http.NewRequestWithContext(ctx, http.MethodPost, runnerBase+wire.RouteGenerate, bytes.NewReader(body))
	if err != nil {
		return nil, fmt.Errorf("llama: runner call %s: %w", wire.RouteGenerate, err)
	}
	r.live.begin() // the stream is work in flight until relay ends
	resp, err := r.client.Do(hreq)
	if err != nil {
		r.live.end()
		return nil, r.brokenCall(ctx, err)
	}
	if resp.StatusCode != http.StatusOK {
		defer r.live.end()
		defer resp.Body.Close()
		b, err := io.ReadAll(io.LimitReader(resp.Body, wire.MaxCallBody))
		if err != nil {
			return nil, r.brokenCall(ctx, err)
		}
		return nil, replyError(resp.StatusCode, b)
	}
	promptTokens := len(req.Prompt)
	if n, err := strconv.Atoi(resp.Header.Get(wire.HeaderPromptTokens)); err == nil && n >= 0 {
		promptTokens = n // the runner tokenized the text
	}
	out := make(chan Event)
	go r.relay(ctx, resp.Body, promptTokens, max(1, req.N), out)
	return out, nil
}

// TokenizesText says that Generate tokenizes a raw prompt (Request.Text)
// in the runner, in the call that decodes it (backends.TextGenerator).
func (r *Runner) TokenizesText() {}

// resolvePrompt gives a request without prompt tokens or text the tokens
// of its messages rendered by the chat template. A raw text (Text) goes to
// the runner as it is: /generate tokenizes it there, which spares a call
// and the tokens' round trip (the caller owns the template).
func (r *Runner) resolvePrompt(ctx context.Context, req *Request) error {
	if len(req.Prompt) > 0 || req.Text != "" || len(req.Messages) == 0 {
		return nil
	}
	var err error
	if req.Prompt, err = r.ChatPromptContext(ctx, req.Messages, req.Tools, true); err != nil {
		return fmt.Errorf("llama: the prompt: %w", err)
	}
	return nil
}

// relay turns the NDJSON stream into events, up to the final event of
// each of its choices. A stream that breaks before them ends with one made
// here: cancelled when ctx is done, else an error saying why the runner
// went away.
func (r *Runner) relay(ctx context.Context, body io.ReadCloser, promptTokens, choices int, out chan<- Event) {
	defer close(out)
	defer body.Close()
	defer r.live.end()
	lines := bufio.NewReaderSize(body, 16<<10)
	var long []byte // a line longer than the reader's buffer
	received := 0
	for {
		ev, err := readEvent(lines, &long, maxEventLine)
		if errors.Is(err, errEventTooLong) && ctx.Err() == nil {
			// A runner that sends this is broken or hostile: it goes,
			// not the daemon's memory.
			r.proc.killFor(fmt.Sprintf("it sent a stream event over %d MiB (the most a legitimate event can be); killed", maxEventLine>>20))
		}
		if err != nil {
			out <- r.brokenStream(ctx, err, Usage{PromptTokens: promptTokens, CompletionTokens: received})
			return
		}
		r.live.progress()
		if !ev.Done {
			received++
		}
		out <- ev
		if ev.Done {
			if choices--; choices == 0 {
				return
			}
		}
	}
}

// maxEventLine bounds one event line of a /generate stream. An event is
// one token's text (a piece of at most a few hundred bytes) with at most 20
// alternatives' logprobs, an error message, or a tool call's arguments,
// which are text the model generated within its context: 8192 tokens (the
// default context cap) of 64 bytes each, JSON-escaped (at most 6 bytes a
// byte), are 3 MiB. 16 MiB leaves room for a context five times as long.
const maxEventLine = 16 << 20

// errEventTooLong: a runner sent an event line over maxEventLine.
var errEventTooLong = fmt.Errorf("stream event over %d bytes", maxEventLine)

// readEvent reads the next event line of a /generate stream (blank lines
// are skipped; a last line without its newline still counts), at most
// limit bytes (errEventTooLong). long holds the pieces of a line longer
// than rd's buffer.
func readEvent(rd *bufio.Reader, long *[]byte, limit int) (Event, error) {
	if cap(*long) > 1<<20 {
		*long = nil // a long line's buffer is not kept for the stream's life
	}
	for {
		line, err := rd.ReadSlice('\n')
		if err == bufio.ErrBufferFull {
			*long = append((*long)[:0], line...)
			for err == bufio.ErrBufferFull {
				line, err = rd.ReadSlice('\n')
				if len(*long)+len(line) > limit {
					*long = nil
					return Event{}, errEventTooLong
				}
				*long = append(*long, line...)
			}
			line = *long
		}
		if len(bytes.TrimSpace(line)) > 0 {
			switch err {
			case nil:
				return wire.ParseEventLine(line)
			case io.EOF: // the runner went away, perhaps mid-line
				ev, perr := wire.ParseEventLine(line)
				if perr != nil {
					return Event{}, io.ErrUnexpectedEOF
				}
				return ev, nil
			default:
				return Event{}, err
			}
		}
		if err != nil {
			return Event{}, err
		}
	}
}

func (r *Runner) brokenStream(ctx context.Context, err error, u Usage) Event {
	if ctx.Err() != nil {
		return Event{Token: -1, Done: true, Finish: FinishCancelled, Usage: u}
	}
	if err == io.EOF {
		err = io.ErrUnexpectedEOF
	}
	cause := r.brokenCall(ctx, fmt.Errorf("stream: %w", err))
	return Event{Token: -1, Done: true, Finish: FinishError, Err: cause, Usage: u}
}
