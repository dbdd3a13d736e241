package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"sync"
	"testing"
	"time"
)

// TestInfillOneSlotConcurrent sends several /api/generate requests with a
// suffix at once to a daemon whose chat models have one slot, against a real
// runner on a random-weight model with StarCoder's vocabulary (its own
// fill-in-the-middle tokens): each must be answered. An infill that held the
// model's one slot while it waited for another would hang them all; the
// ceiling is generous and only bounds a hang.
func TestInfillOneSlotConcurrent(t *testing.T) {
	_, base := realDaemon(t, []realModel{{"t/coder", "starcoder", "Qwen-Qwen2.5-7B-Instruct"}}, "--chat-slots", "1", "--context-size", "512")
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	const n = 3
	var wg sync.WaitGroup
	errs := make([]error, n)
	for i := range n {
		wg.Go(func() {
			body, _ := json.Marshal(map[string]any{"model": "t/coder", "stream": false,
				"prompt": fmt.Sprintf("def add%d(a, b):\n", i), "suffix": "\n    return c",
				"options": map[string]any{"num_predict": 4, "temperature": 0}})
			req, err := http.NewRequestWithContext(ctx, "POST", base+"/api/generate", bytes.NewReader(body))
			if err != nil {
				errs[i] = err
				return
			}
			res, err := http.DefaultClient.Do(req)
			if err != nil {
				errs[i] = err
				return
			}
			defer res.Body.Close()
			b, _ := io.ReadAll(res.Body)
			var out struct {
				Done            bool `json:"done"`
				PromptEvalCount int  `json:"prompt_eval_count"`
			}
			if res.StatusCode != 200 || json.Unmarshal(b, &out) != nil || !out.Done || out.PromptEvalCount == 0 {
				errs[i] = fmt.Errorf("status %d: %s", res.StatusCode, b)
			}
		})
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Errorf("infill request %d: %v", i, err)
		}
	}
}
