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
func (s *openaiAPI) writeGeneration(c *gin.Context, events <-chan backends.Event, name string, stream bool, so *StreamOptions, chat bool, gen *backends.Request) {
	w := &openAIWriter{c: c, created: time.Now().Unix(), id: newID("cmpl-"), name: name, fp: "modeld-" + s.opt.Version,
		chat: chat, n: max(1, gen.N), logprobs: gen.Logprobs || gen.TopLogprobs > 0, top: gen.TopLogprobs}
	if chat {
		w.id = newID("chatcmpl-")
	}
	if !stream {
		w.whole(events)
		return
	}
	w.sse, w.offsets = newSSE(c), make([]int, w.n)
	w.sse.fast = appendChunk
	if chat {
		for i := 0; i < w.n; i++ {
			empty := ""
			w.sse.send(w.chatChunk(ChunkChoice{Index: i, Delta: ChunkDelta{Role: "assistant", Content: &empty}}))
		}
	}
	w.so = so
	streamEvents(c.Request.Context(), events, w.n, w)
}

// openAIWriter answers one generation in the chat or text completion shape.
type openAIWriter struct {
	c              *gin.Context
	created        int64
	id, name, fp   string
	chat, logprobs bool
	n, top         int
	sse            *sseWriter
	offsets        []int // completions: each choice's text offset so far
	usage          backends.Usage
	so             *StreamOptions
}

// whole reads the generation to its end and answers with one object.
func (w *openAIWriter) whole(events <-chan backends.Event) {
	res, usage, err := collectChoices(events, w.n)
	if errors.Is(err, errCut) {
		writeCut(w.c, nil) // a 503 when the shutdown cut it; nothing when the client is gone
		return
	}
	if err != nil {
		writeError(w.c, err)
		return
	}
	u := toUsage(usage)
	if w.chat {
		out := ChatCompletion{ID: w.id, Object: "chat.completion", Created: w.created, Model: w.name, SystemFingerprint: w.fp,
			Choices: make([]ChatChoice, 0, w.n), Usage: u}
		for i, r := range res {
			out.Choices = append(out.Choices, chatChoice(i, r, w.logprobs))
		}
		w.c.JSON(http.StatusOK, out)
		return
	}
	out := Completion{ID: w.id, Object: "text_completion", Created: w.created, Model: w.name, SystemFingerprint: w.fp,
		Choices: make([]CompletionChoice, 0, w.n), Usage: &u}
	for i, r := range res {
		finish := string(r.Finish)
		ch := CompletionChoice{Text: r.Text, Index: i, FinishReason: &finish}
		if w.logprobs {
			ch.Logprobs = completionLogprobs(r.Logprobs, 0, w.top)
		}
		out.Choices = append(out.Choices, ch)
	}
	w.c.JSON(http.StatusOK, out)
}

func (w *openAIWriter) chatChunk(ch ChunkChoice) ChatCompletionChunk {
	return ChatCompletionChunk{ID: w.id, Object: "chat.completion.chunk", Created: w.created, Model: w.name, SystemFingerprint: w.fp,
		Choices: []ChunkChoice{ch}}
}

func (w *openAIWriter) textChunk(ch CompletionChoice) Completion {
	return Completion{ID: w.id, Object: "text_completion", Created: w.created, Model: w.name, SystemFingerprint: w.fp,
		Choices: []CompletionChoice{ch}}
}

// delta sends an event's chunks.
func (w *openAIWriter) delta(ev backends.Event) {
	i := ev.Index
	if w.chat {
		w.chatDelta(i, ev)
	} else if ev.Text != "" || ev.Logprobs != nil {
		ch := CompletionChoice{Text: ev.Text, Index: i}
		if ev.Logprobs != nil {
			ch.Logprobs = completionLogprobs([]*backends.Logprobs{ev.Logprobs}, w.offsets[i], w.top)
			w.offsets[i] += len(ev.Logprobs.Bytes)
		}
		w.sse.send(w.textChunk(ch))
	}
}

// end sends the usage chunk when the request asked for one, and [DONE].
func (w *openAIWriter) end() {
	if w.so != nil && w.so.IncludeUsage {
		u := toUsage(w.usage)
		if w.chat {
			w.sse.send(ChatCompletionChunk{ID: w.id, Object: "chat.completion.chunk", Created: w.created, Model: w.name,
				SystemFingerprint: w.fp, Choices: []ChunkChoice{}, Usage: &u})
		} else {
			w.sse.send(Completion{ID: w.id, Object: "text_completion", Created: w.created, Model: w.name,
				SystemFingerprint: w.fp, Choices: []CompletionChoice{}, Usage: &u})
		}
	}
	w.sse.done()
}

// fail ends the stream with an error event (a 503 when the shutdown cut a
// stream that has sent nothing yet).
func (w *openAIWriter) fail(err error) {
	if !w.sse.started && errors.Is(err, ErrShuttingDown) {
		writeError(w.c, err)
		return
	}
	w.sse.send(gin.H{"error": toAPIError(err)})
}

// chatDelta sends choice i's chunks of one event. The token's logprobs ride
// on the first chunk the event gives, or on an empty delta when it gives
// none (text held back).
func (w *openAIWriter) chatDelta(i int, ev backends.Event) {
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
		w.sse.send(w.chatChunk(ch))
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
}

// finish sends a choice's finish chunk.
func (w *openAIWriter) finish(ev backends.Event) {
	sumUsage(&w.usage, ev.Usage)
	finish := string(ev.Finish)
	if w.chat {
		w.sse.send(w.chatChunk(ChunkChoice{Index: ev.Index, FinishReason: &finish}))
	} else {
		w.sse.send(w.textChunk(CompletionChoice{Index: ev.Index, FinishReason: &finish}))
	}
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
