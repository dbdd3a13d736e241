package main

import (
	"fmt"
	"strconv"
	"testing"

	"github.com/modeld/modeld/internal/testenv"
)

// TestReuseAnswersAgainstDaemon: an agent's loop through /v1/completions
// on the trained model, whose next turn repeats the last answer. With
// --reuse-answers (the default) the daemon evaluates that answer again
// while idle (modeld_answer_tokens_reevaluated_total counts it) and the
// next turn reads it from the cache; with --reuse-answers=false it reads
// only the last prompt. The texts are the same either way.
func TestReuseAnswersAgainstDaemon(t *testing.T) {
	model := testenv.TrainedModel(t)
	const id, budget = "t/stories", 64
	const prompt = "Once upon a time, there was a little girl named Lily. She liked to play with her dog in the park."
	type turn struct {
		text, finish               string
		prompt, cached, completion int
	}
	run := func(reuse bool) (first, next turn) {
		home := t.TempDir()
		if out, err := runCLI(t, map[string]string{"MODELD_HOME": home}, "import", model, "--name", id); err != nil {
			t.Fatalf("import: %v\n%s", err, out)
		}
		_, base, logs := startDaemon(t, home, "--reuse-answers="+strconv.FormatBool(reuse), "--chat-slots", "1")
		t.Cleanup(func() {
			if t.Failed() {
				t.Logf("daemon log (reuse %v):\n%s", reuse, logs)
			}
		})
		complete := func(p string) turn {
			var a struct {
				Choices []struct {
					Text         string `json:"text"`
					FinishReason string `json:"finish_reason"`
				} `json:"choices"`
				Usage struct {
					PromptTokens        int `json:"prompt_tokens"`
					CompletionTokens    int `json:"completion_tokens"`
					PromptTokensDetails struct {
						CachedTokens int `json:"cached_tokens"`
					} `json:"prompt_tokens_details"`
				} `json:"usage"`
			}
			post(t, base, "/v1/completions", map[string]any{"model": id, "prompt": p, "max_tokens": budget, "temperature": 0}, 200, &a)
			return turn{text: a.Choices[0].Text, finish: a.Choices[0].FinishReason, prompt: a.Usage.PromptTokens,
				cached: a.Usage.PromptTokensDetails.CachedTokens, completion: a.Usage.CompletionTokens}
		}
		first = complete(prompt)
		if first.completion < 16 {
			t.Fatalf("the first answer has %d tokens (%q); the test needs a longer one", first.completion, first.text)
		}
		series := fmt.Sprintf("modeld_answer_tokens_reevaluated_total{model=%q}", id)
		inKV := first.completion // an answer cut by max_tokens never feeds its last token
		if first.finish == "length" {
			inKV--
		}
		if reuse {
			poll(t, series+" to count the answer", func() bool {
				v, _ := scrape(t, base)
				return v[series] >= float64(inKV)
			})
		} else if v, _ := scrape(t, base); v[series] != 0 {
			t.Errorf("off: %s is %v", series, v[series])
		}
		next = complete(prompt + first.text + " One day, Lily")
		return first, next
	}
	pf, plain := run(false)
	rf, reused := run(true)
	if rf.text != pf.text || reused.text != plain.text {
		t.Fatalf("texts differ with the answer reused:\n%q\n%q\nwithout:\n%q\n%q", rf.text, reused.text, pf.text, plain.text)
	}
	if plain.cached > pf.prompt {
		t.Errorf("off: the next turn read %d tokens from the cache, more than the last prompt's %d", plain.cached, pf.prompt)
	}
	// The answer's text is tokenized again in the next prompt: most of it
	// gives the tokens the model chose, which the cache holds.
	if reused.cached < rf.prompt+rf.completion/2 || reused.cached >= reused.prompt {
		t.Errorf("on: the next turn read %d of %d tokens from the cache, want the last prompt's %d and most of the answer's %d",
			reused.cached, reused.prompt, rf.prompt, rf.completion)
	}
	t.Logf("next turn: %d prompt tokens; %d read from the cache with the answer reused, %d without", reused.prompt, reused.cached, plain.cached)
}
