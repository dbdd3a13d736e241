package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"
)

type httpParams struct {
	url     string
	name    string
	prompt  string
	tokens  int
	runs    int
	streams int
	// wide is a second, wider aggregate measurement (0: none).
	wide int
	// agentTurns is the agent-loop measurement's turns (0: none): a
	// conversation of agentRepeat copies of the prompt that grows by a turn
	// each request, so that each turn's prompt but its tail is cached.
	agentTurns, agentRepeat int
	// agentAnswer is each turn's answer in tokens, appended to the
	// conversation as text; agentGap the pause before the next turn (the
	// agent running its tool).
	agentAnswer int
	agentGap    time.Duration
	// noPromptCache sends cache_prompt: false (llama-server's switch for
	// its prompt cache), except in the agent loop, which measures the cache.
	noPromptCache bool
}

type httpResult struct {
	Tokens       int       `json:"tokens"`
	Streams      int       `json:"streams"`
	PromptTokens int       `json:"promptTokens"`
	Decode       []float64 `json:"decode"`
	TTFTMs       []float64 `json:"ttftMs"`
	CachedTokens []int     `json:"cachedTokens"`
	Aggregate    []float64 `json:"aggregate"`
	WideStreams  int       `json:"wideStreams,omitempty"`
	Wide         []float64 `json:"wide,omitempty"`
	// AgentTTFTMs are the agent loop's per-turn times to first token, of
	// turns whose prompt was AgentPromptTokens long with AgentCached of
	// them reused.
	AgentTTFTMs       []float64 `json:"agentTtftMs,omitempty"`
	AgentPromptTokens int       `json:"agentPromptTokens,omitempty"`
	AgentCached       int       `json:"agentCached,omitempty"`
	// AgentAnswer is each turn's answer in tokens, AgentGapMs the pause
	// between turns.
	AgentAnswer int     `json:"agentAnswer,omitempty"`
	AgentGapMs  float64 `json:"agentGapMs,omitempty"`
	// ChunksPerRun is the SSE chunks with text of each decode run: fewer
	// than Tokens means some tokens released no text of their own.
	ChunksPerRun []int `json:"chunksPerRun"`
	// GapP50Ms and GapP99Ms are inter-chunk gaps of the decode runs.
	GapP50Ms float64 `json:"gapP50Ms"`
	GapP99Ms float64 `json:"gapP99Ms"`
	// Text is the first decode run's, whose prompt shared only the BOS with
	// the request before it (the warm-up). The later decode runs reuse the
	// first's prompt KV (CachedTokens of them); greedy decoding must give
	// the same text, and ReuseDiffers counts the runs where it did not.
	Text              string `json:"text"`
	FirstCachedTokens int    `json:"firstCachedTokens"`
	ReuseCachedTokens int    `json:"reuseCachedTokens"`
	ReuseDiffers      int    `json:"reuseDiffers"`
}

func runHTTP(args []string) error {
	fs := flag.NewFlagSet("http", flag.ContinueOnError)
	var p httpParams
	fs.StringVar(&p.url, "url", "", "modeld base URL, e.g. http://127.0.0.1:PORT (required)")
	fs.StringVar(&p.name, "name", "", "model id (required)")
	fs.StringVar(&p.prompt, "prompt", "", "prompt text (required)")
	fs.IntVar(&p.tokens, "tokens", 256, "max_tokens of each request")
	fs.IntVar(&p.runs, "runs", 5, "runs per measurement")
	fs.IntVar(&p.streams, "streams", 4, "concurrent streams of the aggregate measurement")
	fs.IntVar(&p.wide, "wide", 0, "concurrent streams of a second aggregate measurement (0: none)")
	fs.IntVar(&p.agentTurns, "agent-turns", 0, "turns of the agent-loop measurement (0: none)")
	fs.IntVar(&p.agentRepeat, "agent-repeat", 40, "copies of the prompt in the agent loop's conversation")
	fs.IntVar(&p.agentAnswer, "agent-answer", 2, "tokens of each agent turn's answer, appended to the conversation")
	fs.DurationVar(&p.agentGap, "agent-gap", 0, "pause between agent turns (the agent running its tool)")
	fs.BoolVar(&p.noPromptCache, "no-prompt-cache", false, "send cache_prompt: false (llama-server) outside the agent loop")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if p.url == "" || p.name == "" || p.prompt == "" {
		return errors.New("http: -url, -name and -prompt are required")
	}
	// A new connection per request: llama-server closes idle keep-alive
	// connections, and a POST on one it just closed fails with EOF.
	client := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}}
	res, err := measureHTTP(context.Background(), client, p)
	if err != nil {
		return err
	}
	return printJSON(res)
}

// sseStream is one streamed completion seen by the client.
type sseStream struct {
	streamTiming
	chunkTimes   []time.Time
	text         strings.Builder
	finish       string
	promptTokens int
	completion   int
	cached       int
}

// completionStream posts a streaming greedy completion and reads it to the
// end. Tokens are counted by the usage chunk (a token may release no text);
// first and last are the first and last chunks with text.
func completionStream(ctx context.Context, c *http.Client, p httpParams, prompt string, maxTokens int) (*sseStream, error) {
	fields := map[string]any{
		"model": p.name, "prompt": prompt, "max_tokens": maxTokens, "temperature": 0,
		"stream": true, "stream_options": map[string]any{"include_usage": true},
	}
	if p.noPromptCache {
		fields["cache_prompt"] = false
	}
	body, err := json.Marshal(fields)
	if err != nil {
		return nil, err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, strings.TrimRight(p.url, "/")+"/v1/completions", bytes.NewReader(body))
	if err != nil {
		return nil, err
	}
	req.Header.Set("Content-Type", "application/json")
	s := &sseStream{}
	s.start = time.Now()
	resp, err := c.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
		return nil, fmt.Errorf("POST /v1/completions: %s: %s", resp.Status, bytes.TrimSpace(b))
	}
	if err := s.read(resp.Body); err != nil {
		return nil, err
	}
	if s.finish != "length" || s.completion != maxTokens {
		return nil, fmt.Errorf("finish %q after %d tokens, want length after %d", s.finish, s.completion, maxTokens)
	}
	s.tokens = s.completion
	return s, nil
}

// read parses the server-sent events of a completion stream up to
// "data: [DONE]", timing each chunk that carries text.
func (s *sseStream) read(r io.Reader) error {
	br := bufio.NewReader(r)
	for {
		line, err := br.ReadBytes('\n')
		now := time.Now()
		if err != nil {
			if errors.Is(err, io.EOF) {
				return errors.New("stream ended before data: [DONE]")
			}
			return err
		}
		data, ok := bytes.CutPrefix(bytes.TrimRight(line, "\r\n"), []byte("data: "))
		if !ok {
			continue
		}
		if string(data) == "[DONE]" {
			return nil
		}
		var ev struct {
			Error   *struct{ Message string } `json:"error"`
			Choices []struct {
				Text         string  `json:"text"`
				FinishReason *string `json:"finish_reason"`
			} `json:"choices"`
			Usage *struct {
				PromptTokens        int `json:"prompt_tokens"`
				CompletionTokens    int `json:"completion_tokens"`
				PromptTokensDetails *struct {
					CachedTokens int `json:"cached_tokens"`
				} `json:"prompt_tokens_details"`
			} `json:"usage"`
		}
		if err := json.Unmarshal(data, &ev); err != nil {
			return fmt.Errorf("bad event %q: %w", data, err)
		}
		if ev.Error != nil {
			return fmt.Errorf("error event: %s", ev.Error.Message)
		}
		for _, ch := range ev.Choices {
			if ch.Text != "" {
				if len(s.chunkTimes) == 0 {
					s.first = now
				}
				s.last = now
				s.chunkTimes = append(s.chunkTimes, now)
				s.text.WriteString(ch.Text)
			}
			if ch.FinishReason != nil {
				s.finish = *ch.FinishReason
			}
		}
		if u := ev.Usage; u != nil {
			s.promptTokens, s.completion = u.PromptTokens, u.CompletionTokens
			if u.PromptTokensDetails != nil {
				s.cached = u.PromptTokensDetails.CachedTokens
			}
		}
	}
}

// measureHTTP warms the model up (the first request loads it; its prompt
// is a variant, so the next request reuses no KV but the BOS), then
// measures decode speed on the plain prompt, time to first token on one
// prompt variant per run, and the aggregate of p.streams concurrent streams.
func measureHTTP(ctx context.Context, c *http.Client, p httpParams) (res httpResult, err error) {
	res.Tokens, res.Streams = p.tokens, p.streams
	if _, err := completionStream(ctx, c, p, variant(p.prompt, len(variantWords)-1), 2); err != nil {
		return res, fmt.Errorf("warm-up: %w", err)
	}
	var gaps []float64
	for i := 0; i < p.runs; i++ {
		s, err := completionStream(ctx, c, p, p.prompt, p.tokens)
		if err != nil {
			return res, err
		}
		res.PromptTokens = s.promptTokens
		res.Decode = append(res.Decode, decodeRate(s.tokens, 0, s.last.Sub(s.first).Seconds()))
		res.ChunksPerRun = append(res.ChunksPerRun, len(s.chunkTimes))
		for j := 1; j < len(s.chunkTimes); j++ {
			gaps = append(gaps, ms(s.chunkTimes[j].Sub(s.chunkTimes[j-1])))
		}
		if i == 0 {
			res.Text, res.FirstCachedTokens = s.text.String(), s.cached
		} else {
			res.ReuseCachedTokens = s.cached
			if s.text.String() != res.Text {
				res.ReuseDiffers++
			}
		}
	}
	res.GapP50Ms, res.GapP99Ms = quantile(gaps, 0.5), quantile(gaps, 0.99)
	for i := 0; i < p.runs; i++ {
		s, err := completionStream(ctx, c, p, variant(p.prompt, i), 2)
		if err != nil {
			return res, err
		}
		res.TTFTMs = append(res.TTFTMs, ms(s.first.Sub(s.start)))
		res.CachedTokens = append(res.CachedTokens, s.cached)
	}
	for i := 0; i < p.runs; i++ {
		agg, err := aggregate(p.streams, func(k int) (streamTiming, error) {
			s, err := completionStream(ctx, c, p, variant(p.prompt, i*p.streams+k+1), p.tokens)
			if err != nil {
				return streamTiming{}, err
			}
			return s.streamTiming, nil
		})
		if err != nil {
			return res, err
		}
		res.Aggregate = append(res.Aggregate, agg)
	}
	for i := 0; i < p.runs && p.wide > 0; i++ {
		res.WideStreams = p.wide
		agg, err := aggregate(p.wide, func(k int) (streamTiming, error) {
			s, err := completionStream(ctx, c, p, variant(p.prompt, i*p.wide+k+2), p.tokens)
			if err != nil {
				return streamTiming{}, err
			}
			return s.streamTiming, nil
		})
		if err != nil {
			return res, err
		}
		res.Wide = append(res.Wide, agg)
	}
	if p.agentTurns > 0 {
		if err := measureAgent(ctx, c, p, &res); err != nil {
			return res, fmt.Errorf("agent loop: %w", err)
		}
	}
	return res, nil
}

// measureAgent is an agent's loop: a long conversation (agentRepeat copies
// of the prompt) that grows by a short turn per request, each request
// reusing the cached prompt of the one before. The first turn fills the
// cache and is not timed.
func measureAgent(ctx context.Context, c *http.Client, p httpParams, res *httpResult) error {
	cp := p
	cp.noPromptCache = false
	conv := strings.Repeat(p.prompt+" ", p.agentRepeat)
	res.AgentAnswer, res.AgentGapMs = max(1, p.agentAnswer), ms(p.agentGap)
	for turn := 0; turn <= p.agentTurns; turn++ {
		if turn > 0 && p.agentGap > 0 {
			select {
			case <-time.After(p.agentGap):
			case <-ctx.Done():
				return ctx.Err()
			}
		}
		conv += fmt.Sprintf("\nTool result %d: ok.\n", turn)
		s, err := completionStream(ctx, c, cp, conv, res.AgentAnswer)
		if err != nil {
			return err
		}
		if turn == 0 {
			continue
		}
		res.AgentTTFTMs = append(res.AgentTTFTMs, ms(s.first.Sub(s.start)))
		res.AgentPromptTokens, res.AgentCached = s.promptTokens, s.cached
		conv += s.text.String()
	}
	return nil
}
