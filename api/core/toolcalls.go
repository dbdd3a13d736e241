package core

import (
	"context"

	"github.com/modeld/modeld/backends"
)

// firstCallOnly is a chat model whose events carry its first tool call
// only: parallel_tool_calls false. Where the calls are grammar-constrained
// (ToolChoice.Single) the model writes one; elsewhere it may generate more,
// and they are dropped, not returned.
type firstCallOnly struct{ ChatModel }

func (m firstCallOnly) Generate(ctx context.Context, req backends.Request) (<-chan backends.Event, error) {
	in, err := m.ChatModel.Generate(ctx, req)
	if err != nil {
		return nil, err
	}
	out := make(chan backends.Event)
	go func() {
		defer close(out)
		for ev := range in {
			kept := ev.ToolCalls[:0:0]
			for _, d := range ev.ToolCalls {
				if d.Index == 0 {
					kept = append(kept, d)
				}
			}
			ev.ToolCalls = kept
			out <- ev
		}
	}()
	return out, nil
}
