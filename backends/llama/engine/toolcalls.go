package engine

import (
	"github.com/modeld/modeld/backends"
	"github.com/modeld/modeld/backends/toolcall"
)

// wantsToolCalls reports whether r's output is read for tool calls: it
// offers tools and does not forbid calling them.
func wantsToolCalls(r *Request) bool {
	return len(r.Tools) > 0 && r.ToolChoice.Mode != backends.ToolChoiceNone
}

// toolEvents turns the events of a generation into content and tool-call
// events: the text of every event goes through the family's stream parser
// (fam's markers arrive as text, control tokens rendered), each event
// carries the content and the tool-call deltas its text released, and the
// final event says FinishToolCalls when the output held calls and ended at
// end of generation. A malformed call ends the parse (toolcall's rules: the
// text after it is dropped); an output cut inside a call (FinishLength)
// keeps its reason with the part of the call generated. The channel it
// returns closes after the final event, as in does.
func toolEvents(in <-chan Event, fam toolcall.Family) <-chan Event {
	out := make(chan Event)
	go func() {
		defer close(out)
		st, err := toolcall.NewStream(fam, nil)
		calls := 0
		for ev := range in {
			if err != nil { // no parser for fam: the text passes as it is
				out <- ev
				continue
			}
			text, deltas, _ := st.Feed(ev.Text)
			if ev.Done {
				rest, more, _ := st.Close()
				text += rest
				deltas = append(deltas, more...)
			}
			for _, d := range deltas {
				if d.ID != "" {
					calls++
				}
			}
			ev.Text, ev.ToolCalls = text, deltas
			if ev.Done && calls > 0 && ev.Finish == backends.FinishStop {
				ev.Finish = backends.FinishToolCalls
			}
			out <- ev
		}
	}()
	return out
}
