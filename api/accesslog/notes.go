package accesslog

import (
	"sync"

	"github.com/gin-gonic/gin"
	"github.com/modeld/modeld/backends"
)

// accessNote is what a request's handlers tell its access line.
type accessNote struct {
	mu                 sync.Mutex
	model              string
	prompt, completion int
	counted            bool
	// cached is how many prompt tokens a generation read from the prefix
	// cache (its usage's CachedTokens).
	cached int
	// generated: a generation ran (NoteEvents); finish is how its last
	// event ended it ("" until one did).
	generated bool
	finish    backends.FinishReason
	// handlerDone is closed when the handlers have returned: a generation's
	// events that nobody reads any more are then drained.
	handlerDone chan struct{}
	streams     sync.WaitGroup // noteEvents forwarders still running
}

func noteOf(c *gin.Context) *accessNote {
	if v, ok := c.Get(accessNoteKey); ok {
		if n, ok := v.(*accessNote); ok {
			return n
		}
	}
	return nil
}

// NoteModel records the model a request names, for its access line.
func NoteModel(c *gin.Context, id string) {
	if n := noteOf(c); n != nil && id != "" {
		n.mu.Lock()
		n.model = id
		n.mu.Unlock()
	}
}

// NoteTokens records a request's prompt and completion tokens, for its
// access line.
func NoteTokens(c *gin.Context, prompt, completion int) {
	if n := noteOf(c); n != nil {
		n.setTokens(prompt, completion)
	}
}

func (n *accessNote) setTokens(prompt, completion int) {
	n.mu.Lock()
	n.prompt, n.completion, n.counted = prompt, completion, true
	n.mu.Unlock()
}

// NoteEvents passes a generation's events through unchanged, recording the
// token counts of the usage they carry, and promptTokens until one does.
// Events that arrive once the handlers have returned are drained (counted,
// not delivered), so that a generation nobody reads does not block.
func NoteEvents(c *gin.Context, in <-chan backends.Event, promptTokens int) <-chan backends.Event {
	n := noteOf(c)
	if n == nil {
		return in
	}
	if promptTokens > 0 {
		n.setTokens(promptTokens, 0)
	}
	n.mu.Lock()
	n.generated = true
	n.mu.Unlock()
	out := make(chan backends.Event)
	n.streams.Add(1)
	go func() {
		defer n.streams.Done()
		defer close(out)
		for ev := range in {
			if u := ev.Usage; u.PromptTokens > 0 || u.CompletionTokens > 0 {
				n.setTokens(u.PromptTokens, u.CompletionTokens)
				n.mu.Lock()
				n.cached = u.CachedTokens
				n.mu.Unlock()
			}
			if ev.Finish != "" {
				n.mu.Lock()
				n.finish = ev.Finish
				n.mu.Unlock()
			}
			select {
			case out <- ev:
			case <-n.handlerDone:
			}
		}
	}()
	return out
}
