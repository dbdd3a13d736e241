package tasks

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"

	"github.com/gin-gonic/gin"

	"github.com/modeld/modeld/api/core"
	"github.com/modeld/modeld/backends"
)

// SummarizeRequest takes transformers.js's generation options; unset ones come
// from the model's generation_config.json.
type SummarizeRequest struct {
	Model             string          `json:"model"`
	Input             json.RawMessage `json:"input"`
	MaxNewTokens      *int            `json:"max_new_tokens"`
	MinNewTokens      *int            `json:"min_new_tokens"`
	NumBeams          *int            `json:"num_beams"`
	LengthPenalty     *float64        `json:"length_penalty"`
	EarlyStopping     json.RawMessage `json:"early_stopping"` // true, false or "never"
	NoRepeatNgramSize *int            `json:"no_repeat_ngram_size"`
	Stream            bool            `json:"stream"`
	KeepAlive         core.KeepAlive  `json:"keep_alive"`
}

// Summary is one input's summary.
type Summary struct {
	Object       string `json:"object"` // "summary"
	Index        int    `json:"index"`
	SummaryText  string `json:"summary_text"`
	FinishReason string `json:"finish_reason"` // "stop" (end of sequence) or "length"
}

// SummaryList is the non-streaming summarize response.
type SummaryList struct {
	Object string     `json:"object"` // "list"
	Model  string     `json:"model"`
	Data   []Summary  `json:"data"`
	Usage  core.Usage `json:"usage"`
}

// SummaryChunk is one server-sent event of a streamed summary. The last one has
// finish_reason, the whole summary_text and usage.
type SummaryChunk struct {
	Object       string      `json:"object"` // "summary.chunk"
	Model        string      `json:"model"`
	Index        int         `json:"index"`
	Delta        string      `json:"delta"`
	FinishReason *string     `json:"finish_reason"`
	SummaryText  *string     `json:"summary_text,omitempty"`
	Usage        *core.Usage `json:"usage,omitempty"`
}

func (r *SummarizeRequest) Options() ([]string, backends.SummarizeOptions, error) {
	var errs []error
	var o backends.SummarizeOptions
	texts, err := core.ParseTexts("input", r.Input, core.MaxSummarizeInputs)
	if err != nil {
		errs = append(errs, err)
	}
	if v := r.MaxNewTokens; v != nil {
		if *v < 1 {
			errs = append(errs, core.BadRequest("max_new_tokens", "max_new_tokens must be at least 1, got %d", *v))
		} else if *v > core.MaxNewTokens {
			errs = append(errs, core.BadRequest("max_new_tokens", "max_new_tokens %d is more than the %d allowed", *v, core.MaxNewTokens))
		}
		o.MaxNewTokens = *v
	}
	if v := r.MinNewTokens; v != nil {
		if *v < 0 {
			errs = append(errs, core.BadRequest("min_new_tokens", "min_new_tokens must not be negative, got %d", *v))
		} else if *v > core.MaxNewTokens {
			errs = append(errs, core.BadRequest("min_new_tokens", "min_new_tokens %d is more than the %d allowed", *v, core.MaxNewTokens))
		}
		if r.MaxNewTokens != nil && *v > *r.MaxNewTokens {
			errs = append(errs, core.BadRequest("min_new_tokens", "min_new_tokens %d exceeds max_new_tokens %d", *v, *r.MaxNewTokens))
		}
		o.MinNewTokens = v
	}
	if v := r.NumBeams; v != nil {
		if *v < 1 {
			errs = append(errs, core.BadRequest("num_beams", "num_beams must be at least 1, got %d", *v))
		} else if *v > core.MaxNumBeams {
			errs = append(errs, core.BadRequest("num_beams", "num_beams %d is more than the %d allowed", *v, core.MaxNumBeams))
		}
		o.NumBeams = *v
	}
	if v := r.LengthPenalty; v != nil {
		if !core.Finite(*v) {
			errs = append(errs, core.BadRequest("length_penalty", "length_penalty must be a finite number"))
		}
		o.LengthPenalty = v
	}
	if v := r.NoRepeatNgramSize; v != nil {
		if *v < 0 {
			errs = append(errs, core.BadRequest("no_repeat_ngram_size", "no_repeat_ngram_size must not be negative, got %d", *v))
		}
		o.NoRepeatNgramSize = v
	}
	if es := string(r.EarlyStopping); es != "" && es != "null" {
		var b bool
		var s string
		switch {
		case json.Unmarshal(r.EarlyStopping, &b) == nil:
			o.EarlyStopping = backends.EarlyStoppingFalse
			if b {
				o.EarlyStopping = backends.EarlyStoppingTrue
			}
		case json.Unmarshal(r.EarlyStopping, &s) == nil && s == "never":
			o.EarlyStopping = backends.EarlyStoppingNever
		default:
			errs = append(errs, core.BadRequest("early_stopping", "early_stopping must be true, false or \"never\", got %s", core.Clip(es)))
		}
	}
	if r.Stream {
		if len(texts) > 1 {
			errs = append(errs, core.BadRequest("stream", "stream needs a single input, got %d", len(texts)))
		}
		if o.NumBeams > 1 {
			errs = append(errs, core.BadRequest("num_beams", "stream needs greedy search (num_beams 1), got num_beams %d", o.NumBeams))
		}
		// A model whose generation_config.json asks for beam search streams greedily.
		o.NumBeams = 1
	}
	return texts, o, core.JoinBadRequests(errs)
}

func (s *tasksAPI) summarize(c *gin.Context) {
	var req SummarizeRequest
	if err := core.DecodeJSON(c, &req); err != nil {
		core.WriteError(c, err)
		return
	}
	texts, opts, err := req.Options()
	if err != nil {
		core.WriteError(c, err)
		return
	}
	h, sm, ok := core.AcquireAs[backends.Summarizer](s.Core, c, req.Model, req.KeepAlive, core.SummarizeEndpoint)
	if !ok {
		return
	}
	defer h.Release()
	if req.Stream {
		s.summarizeStream(c, req.Model, sm, texts[0], opts)
		return
	}
	res, err := sm.Summarize(c.Request.Context(), texts, opts)
	if err != nil {
		core.WriteError(c, err)
		return
	}
	core.NoteTokens(c, res.InputTokens, res.OutputTokens)
	out := SummaryList{Object: "list", Model: req.Model, Data: make([]Summary, len(res.Summaries)), Usage: summaryUsage(res)}
	for i, sum := range res.Summaries {
		out.Data[i] = Summary{Object: "summary", Index: i, SummaryText: sum.Text, FinishReason: sum.FinishReason}
	}
	core.SetTruncated(c, res.Truncated)
	c.JSON(http.StatusOK, out)
}

func summaryUsage(res backends.SummarizeResult) core.Usage {
	return core.Usage{PromptTokens: res.InputTokens, CompletionTokens: res.OutputTokens, TotalTokens: res.InputTokens + res.OutputTokens}
}

// errClientGone stops a stream whose client disconnected.
var errClientGone = errors.New("client disconnected")

// summarizeStream sends each generated piece as it comes, then a last event with
// the finish reason, the whole summary and usage, then [DONE]. An error before
// the first event is an ordinary error response; after it, an error event.
func (s *tasksAPI) summarizeStream(c *gin.Context, id string, sm backends.Summarizer, text string, opts backends.SummarizeOptions) {
	ctx := c.Request.Context()
	sse := core.NewSSE(c)
	opts.OnToken = func(ev backends.TokenEvent) error {
		if ctx.Err() != nil {
			return errClientGone
		}
		if ev.Text != "" {
			sse.Send(SummaryChunk{Object: "summary.chunk", Model: id, Index: ev.Index, Delta: ev.Text})
		}
		return nil
	}
	res, err := sm.Summarize(ctx, []string{text}, opts)
	if err == nil && len(res.Summaries) != 1 {
		err = fmt.Errorf("summarization returned %d summaries for one input", len(res.Summaries))
	}
	switch {
	case err != nil && (ctx.Err() != nil || errors.Is(err, errClientGone)):
		core.WriteCut(c, sse) // an error event when the shutdown cut it; else nobody is listening
		return
	case err != nil && !sse.Started:
		core.WriteError(c, err)
		return
	case err != nil:
		sse.Send(gin.H{"error": core.ToAPIError(fmt.Errorf("summarization failed: %w", err))})
		return
	}
	sum := res.Summaries[0]
	u := summaryUsage(res)
	core.NoteTokens(c, res.InputTokens, res.OutputTokens)
	sse.Send(SummaryChunk{Object: "summary.chunk", Model: id, FinishReason: &sum.FinishReason, SummaryText: &sum.Text, Usage: &u})
	sse.Done()
}
