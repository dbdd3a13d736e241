package openai

import (
	"errors"
	"net/http"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/modeld/modeld/api/core"
	"github.com/modeld/modeld/backends"
)

// writeGeneration writes a generation as a chat completion (chat) or a text
// completion, streamed as server-sent events or as one JSON object. gen is
// the request it answers: its N choices (each streamed chunk names its
// choice's index, each choice gets its own finish chunk; the usage counts
// the prompt once and the choices' completion tokens summed) and whether it
// asked for logprobs.
func (s *openaiAPI) writeGeneration(c *gin.Context, events <-chan backends.Event, name string, stream bool, so *core.StreamOptions, chat bool, gen *backends.Request) {
	w := &openAIWriter{c: c, created: time.Now().Unix(), id: core.NewID("cmpl-"), name: name, fp: "modeld-" + s.Opt.Version,
		chat: chat, n: max(1, gen.N), logprobs: gen.Logprobs || gen.TopLogprobs > 0, top: gen.TopLogprobs}
	if chat {
		w.id = core.NewID("chatcmpl-")
	}
	if !stream {
		w.whole(events)
		return
	}
	w.sse, w.offsets = core.NewSSE(c), make([]int, w.n)
	w.sse.Fast = AppendChunk
	if chat {
		for i := 0; i < w.n; i++ {
			empty := ""
			w.sse.Send(w.chatChunk(ChunkChoice{Index: i, Delta: ChunkDelta{Role: "assistant", Content: &empty}}))
		}
	}
	w.so = so
	core.StreamEvents(c.Request.Context(), events, w.n, w)
}

// openAIWriter answers one generation in the chat or text completion shape.
type openAIWriter struct {
	c              *gin.Context
	created        int64
	id, name, fp   string
	chat, logprobs bool
	n, top         int
	sse            *core.SseWriter
	offsets        []int // completions: each choice's text offset so far
	usage          backends.Usage
	so             *core.StreamOptions
}

// whole reads the generation to its end and answers with one object.
func (w *openAIWriter) whole(events <-chan backends.Event) {
	res, usage, err := core.CollectChoices(events, w.n)
	if errors.Is(err, core.ErrCut) {
		core.WriteCut(w.c, nil) // a 503 when the shutdown cut it; nothing when the client is gone
		return
	}
	if err != nil {
		core.WriteError(w.c, err)
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
			ch.Logprobs = core.NewCompletionLogprobs(r.Logprobs, 0, w.top)
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

// Delta sends an event's chunks.
func (w *openAIWriter) Delta(ev backends.Event) {
	i := ev.Index
	if w.chat {
		w.chatDelta(i, ev)
	} else if ev.Text != "" || ev.Logprobs != nil {
		ch := CompletionChoice{Text: ev.Text, Index: i}
		if ev.Logprobs != nil {
			ch.Logprobs = core.NewCompletionLogprobs([]*backends.Logprobs{ev.Logprobs}, w.offsets[i], w.top)
			w.offsets[i] += len(ev.Logprobs.Bytes)
		}
		w.sse.Send(w.textChunk(ch))
	}
}

// End sends the usage chunk when the request asked for one, and [DONE].
func (w *openAIWriter) End() {
	if w.so != nil && w.so.IncludeUsage {
		u := toUsage(w.usage)
		if w.chat {
			w.sse.Send(ChatCompletionChunk{ID: w.id, Object: "chat.completion.chunk", Created: w.created, Model: w.name,
				SystemFingerprint: w.fp, Choices: []ChunkChoice{}, Usage: &u})
		} else {
			w.sse.Send(Completion{ID: w.id, Object: "text_completion", Created: w.created, Model: w.name,
				SystemFingerprint: w.fp, Choices: []CompletionChoice{}, Usage: &u})
		}
	}
	w.sse.Done()
}

// Fail ends the stream with an error event (a 503 when the shutdown cut a
// stream that has sent nothing yet).
func (w *openAIWriter) Fail(err error) {
	if !w.sse.Started && errors.Is(err, core.ErrShuttingDown) {
		core.WriteError(w.c, err)
		return
	}
	w.sse.Send(gin.H{"error": core.ToAPIError(err)})
}

// chatDelta sends choice i's chunks of one event. The token's logprobs ride
// on the first chunk the event gives, or on an empty delta when it gives
// none (text held back).
func (w *openAIWriter) chatDelta(i int, ev backends.Event) {
	var lp any
	if ev.Logprobs != nil {
		lp = &core.ChatLogprobs{Content: core.ChatTokenLogprobs([]*backends.Logprobs{ev.Logprobs}), Refusal: nil}
	}
	sent := false
	send := func(d ChunkDelta) {
		ch := ChunkChoice{Index: i, Delta: d}
		if !sent {
			ch.Logprobs = lp
		}
		w.sse.Send(w.chatChunk(ch))
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

// Finish sends a choice's finish chunk.
func (w *openAIWriter) Finish(ev backends.Event) {
	core.SumUsage(&w.usage, ev.Usage)
	finish := string(ev.Finish)
	if w.chat {
		w.sse.Send(w.chatChunk(ChunkChoice{Index: ev.Index, FinishReason: &finish}))
	} else {
		w.sse.Send(w.textChunk(CompletionChoice{Index: ev.Index, FinishReason: &finish}))
	}
}

// chatChoice is the wire form of choice i of a whole chat generation.
func chatChoice(i int, r core.ChoiceResult, logprobs bool) ChatChoice {
	var calls []core.WireToolCall
	for _, tc := range r.ToolCalls {
		w := core.WireToolCall{ID: tc.ID, Type: "function"}
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
		ch.Logprobs = &core.ChatLogprobs{Content: core.ChatTokenLogprobs(r.Logprobs)}
	}
	return ch
}
