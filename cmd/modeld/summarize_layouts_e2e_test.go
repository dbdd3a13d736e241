package main

import (
	"os"
	"path/filepath"
	"testing"
)

// TestSummarizeLayoutsAgainstDaemon imports the summarization model in the
// three decoder layouts exported for transformers.js — the merged decoder
// with its KV cache, decoder_model.onnx with decoder_with_past_model.onnx,
// and a decoder with no cache inputs under the merged decoder's name — and
// summarizes through the daemon: each layout gives the transformers.js
// summaries, and a summary that max_new_tokens cuts says finish_reason
// "length" (the EOS that forced_eos_token_id puts at the limit is not a
// stop), where an uncut one says "stop".
func TestSummarizeLayoutsAgainstDaemon(t *testing.T) {
	home := t.TempDir()
	env := map[string]string{"MODELD_HOME": home}
	layout := func(decoders map[string]string) string {
		dir := t.TempDir()
		if err := os.MkdirAll(filepath.Join(dir, "onnx"), 0o755); err != nil {
			t.Fatal(err)
		}
		for _, f := range []string{"config.json", "generation_config.json", "tokenizer.json", "tokenizer_config.json", "onnx/encoder_model.onnx"} {
			copyFile(t, filepath.Join(fixtureDir("summarize"), f), filepath.Join(dir, f))
		}
		for from, to := range decoders {
			copyFile(t, filepath.Join(fixtureDir("summarize"), "onnx", from), filepath.Join(dir, "onnx", to))
		}
		return dir
	}
	for id, dir := range map[string]string{
		"t/merged": fixtureDir("summarize"),
		"t/split":  layout(map[string]string{"decoder_model.onnx": "decoder_model.onnx", "decoder_with_past_model.onnx": "decoder_with_past_model.onnx"}),
		"t/plain":  layout(map[string]string{"decoder_model.onnx": "decoder_model_merged.onnx"}),
	} {
		if out, err := runCLI(t, env, "import", dir, "--name", id); err != nil {
			t.Fatalf("import %s: %v\n%s", id, err, out)
		}
	}
	_, base, logs := startDaemon(t, home)
	defer func() {
		if t.Failed() {
			t.Logf("daemon log:\n%s", logs)
		}
	}()
	var g struct {
		Texts       []string `json:"texts"`
		SummaryText []string `json:"summary_text"`
	}
	readGoldenFile(t, "summarize.json", &g)
	type summaries struct {
		Data []struct {
			SummaryText  string `json:"summary_text"`
			FinishReason string `json:"finish_reason"`
		} `json:"data"`
	}
	for _, id := range []string{"t/merged", "t/split", "t/plain"} {
		var full, cut summaries
		callOK(t, base, "/v1/summarize", map[string]any{"model": id, "input": g.Texts}, &full)
		callOK(t, base, "/v1/summarize", map[string]any{"model": id, "input": g.Texts, "max_new_tokens": 3}, &cut)
		if len(full.Data) != len(g.Texts) || len(cut.Data) != len(g.Texts) {
			t.Fatalf("%s: %d and %d summaries for %d texts", id, len(full.Data), len(cut.Data), len(g.Texts))
		}
		for i := range g.Texts {
			if d := full.Data[i]; d.SummaryText != g.SummaryText[i] || d.FinishReason != "stop" {
				t.Errorf("%s text %d: %q (%s), transformers.js %q (stop)", id, i, d.SummaryText, d.FinishReason, g.SummaryText[i])
			}
			if d := cut.Data[i]; d.FinishReason != "length" {
				t.Errorf("%s text %d cut at max_new_tokens 3: finish_reason %q, want length", id, i, d.FinishReason)
			}
		}
	}
}
