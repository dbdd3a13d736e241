package api

import (
	"errors"
	"net/http"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/modeld/modeld/backends"
)

// writeGeneration writes a generation as a chat completion (chat) or a text
// completion, streamed as server-sent events or as one JSON object. gen is
// the request it answers: its N choices (each streamed chunk names its
// choice's index, each choice gets its own finish chunk; the usage counts
// the prompt once and the choices' completion tokens summed) and whether it
// asked for logprobs.
func (s *Server) writeGeneration(c *gin.Context, events <-chan backends.Event, name string, stream bool, so *StreamOptions, chat bool, gen *backends.Request) {
	created := time.Now().Unix()
	id := newID("cmpl-")
	if chat {
		id = newID("chatcmpl-")
	}
	fp := "modeld-" + s.opt.Version
	n := max(1, gen.N)
	logprobs := gen.Logprobs || gen.TopLogprobs > 0
	if !stream {
		res, usage, err := collectChoices(events, n)
		if errors.Is(err, errCut) {
			writeCut(c, nil) // a 503 when the shutdown cut it; nothing when the client is gone
			return
		}
		if err != nil {
			writeError(c, err)
			return
		}
		u := toUsage(usage)
		if chat {
			out := ChatCompletion{ID: id, Object: "chat.completion", Created: created, Model: name, SystemFingerprint: fp,
				Choices: make([]ChatChoice, 0, n), Usage: u}
			for i, r := range res {
				out.Choices = append(out.Choices, chatChoice(i, r, logprobs))
			}
			c.JSON(http.StatusOK, out)
			return
		}
		out := Completion{ID: id, Object: "text_completion", Created: created, Model: name, SystemFingerprint: fp,
			Choices: make([]CompletionChoice, 0, n), Usage: &u}
		for i, r := range res {
			finish := string(r.Finish)
			ch := CompletionChoice{Text: r.Text, Index: i, FinishReason: &finish}
			if logprobs {
				ch.Logprobs = completionLogprobs(r.Logprobs, 0, gen.TopLogprobs)
			}
			out.Choices = append(out.Choices, ch)
		}
		c.JSON(http.StatusOK, out)
		return
	}

	// A stream left early (cut, failed) is drained in the background: the
	// other choices' events still arrive, and the backend's stream must be
	// read to its end.
	defer func() {
		go func() {
			for range events {
			}
		}()
	}()
	sse := newSSE(c)
	chatChunk := func(ch ChunkChoice) ChatCompletionChunk {
		return ChatCompletionChunk{ID: id, Object: "chat.completion.chunk", Created: created, Model: name, SystemFingerprint: fp,
			Choices: []ChunkChoice{ch}}
	}
	textChunk := func(ch CompletionChoice) Completion {
		return Completion{ID: id, Object: "text_completion", Created: created, Model: name, SystemFingerprint: fp,
			Choices: []CompletionChoice{ch}}
	}
	if chat {
		for i := 0; i < n; i++ {
			empty := ""
			sse.send(chatChunk(ChunkChoice{Index: i, Delta: ChunkDelta{Role: "assistant", Content: &empty}}))
		}
	}
	offsets := make([]int, n) // completions: each choice's text offset so far
	var usage backends.Usage
	for ev := range events {
		i := ev.Index
		if i < 0 || i >= n {
			continue
		}
		if chat {
			// The token's logprobs ride on the first chunk the event gives,
			// or on an empty delta when it gives none (text held back).
			var lp any
			if ev.Logprobs != nil {
				lp = &ChatLogprobs{Content: chatTokenLogprobs([]*backends.Logprobs{ev.Logprobs}), Refusal: nil}
			}
			sent := false
			send := func(d ChunkDelta) {
				ch := ChunkChoice{Index: i, Delta: d}
				if !sent {
					ch.Logprobs = lp
				}
				sse.send(chatChunk(ch))
				sent = true
			}
			if ev.Reasoning != "" {
				send(ChunkDelta{ReasoningContent: ev.Reasoning})
			}
			if ev.Text != "" {
				t := ev.Text
				send(ChunkDelta{Content: &t})
			}
			if len(ev.ToolCalls) > 0 {
				send(ChunkDelta{ToolCalls: chunkToolCalls(ev.ToolCalls)})
			}
			if lp != nil && !sent {
				send(ChunkDelta{})
			}
		} else if ev.Text != "" || ev.Logprobs != nil {
			ch := CompletionChoice{Text: ev.Text, Index: i}
			if ev.Logprobs != nil {
				ch.Logprobs = completionLogprobs([]*backends.Logprobs{ev.Logprobs}, offsets[i], gen.TopLogprobs)
				offsets[i] += len(ev.Logprobs.Bytes)
			}
			sse.send(textChunk(ch))
		}
		if !ev.Done {
			continue
		}
		switch {
		case ev.Finish == backends.FinishCancelled:
			writeCut(c, sse) // an error event when the shutdown cut it
			return
		case generationError(ev) != nil:
			sse.send(gin.H{"error": toAPIError(generationError(ev))})
			return
		}
		sumUsage(&usage, ev.Usage)
		finish := string(ev.Finish)
		if chat {
			sse.send(chatChunk(ChunkChoice{Index: i, FinishReason: &finish}))
		} else {
			sse.send(textChunk(CompletionChoice{Index: i, FinishReason: &finish}))
		}
	}
	if so != nil && so.IncludeUsage {
		u := toUsage(usage)
		if chat {
			sse.send(ChatCompletionChunk{ID: id, Object: "chat.completion.chunk", Created: created, Model: name,
				SystemFingerprint: fp, Choices: []ChunkChoice{}, Usage: &u})
		} else {
			sse.send(Completion{ID: id, Object: "text_completion", Created: created, Model: name,
				SystemFingerprint: fp, Choices: []CompletionChoice{}, Usage: &u})
		}
	}
	sse.done()
}

// chatChoice is the wire form of choice i of a whole chat generation.
func chatChoice(i int, r choiceResult, logprobs bool) ChatChoice {
	var calls []wireToolCall
	for _, tc := range r.ToolCalls {
		w := wireToolCall{ID: tc.ID, Type: "function"}
		w.Function.Name, w.Function.Arguments = tc.Name, tc.Arguments
		calls = append(calls, w)
	}
	content := r.Text
	msg := AssistantMessage{Role: "assistant", Content: &content, ReasoningContent: r.Reasoning, ToolCalls: calls}
	if content == "" && len(calls) > 0 {
		msg.Content = nil
	}
	ch := ChatChoice{Index: i, Message: msg, FinishReason: string(r.Finish)}
	if logprobs {
		ch.Logprobs = &ChatLogprobs{Content: chatTokenLogprobs(r.Logprobs)}
	}
	return ch
}
