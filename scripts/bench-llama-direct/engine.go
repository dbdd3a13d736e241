package main

import (
	"context"
	"slices"
	"sync"
	"time"

	llama "github.com/modeld/modeld/backends/llama/engine"
)

// engine drives modeld's engine.
type engine struct {
	m      *llama.Model
	prompt []int32
	n      int
	round  int32
}

func newEngine(path, prompt string, threads, batchThreads, n int) (*engine, error) {
	m, err := llama.Open(path, llama.Options{Slots: 4, Threads: threads, BatchThreads: batchThreads, ContextSize: n + 512})
	if err != nil {
		return nil, err
	}
	ids, err := m.Tokenize(prompt, true, false)
	if err != nil {
		m.Close()
		return nil, err
	}
	e := &engine{m: m, prompt: ids, n: n}
	if _, err := e.streams(1); err != nil { // warm up
		m.Close()
		return nil, err
	}
	return e, nil
}

func (e *engine) close() { e.m.Close() }

// streams runs k concurrent greedy streams and returns the aggregate decode
// speed, from the first token event of any stream to the last of all (so
// prompt processing is not counted). Every stream's prompt ends with a
// token no earlier run used, so none reuses a cached prefix beyond the
// shared start.
func (e *engine) streams(k int) (float64, error) {
	var (
		wg          sync.WaitGroup
		mu          sync.Mutex
		first, last time.Time
		total       int
		firstErr    error
	)
	for i := 0; i < k; i++ {
		e.round++
		p := append(slices.Clone(e.prompt), 300+e.round%200)
		wg.Add(1)
		go func() {
			defer wg.Done()
			ch, err := e.m.Generate(context.Background(), llama.Request{Prompt: p, MaxTokens: e.n})
			var f, l time.Time
			count := 0
			if err == nil {
				for ev := range ch {
					if ev.Err != nil {
						err = ev.Err
					}
					if !ev.Done {
						if count == 0 {
							f = time.Now()
						}
						count++
						l = time.Now()
					}
				}
			}
			mu.Lock()
			defer mu.Unlock()
			if err != nil && firstErr == nil {
				firstErr = err
			}
			total += count - 1
			if first.IsZero() || f.Before(first) {
				first = f
			}
			if l.After(last) {
				last = l
			}
		}()
	}
	wg.Wait()
	if firstErr != nil {
		return 0, firstErr
	}
	return float64(total) / last.Sub(first).Seconds(), nil
}
