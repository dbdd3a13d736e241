package pipelines

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/modeld/modeld/pipelines/tokenizer"
)

// copyModel copies a committed test model into a temporary folder that a
// test may spoil.
func copyModel(t *testing.T, name string) string {
	t.Helper()
	src := modelDir(t, name)
	dst := t.TempDir()
	err := filepath.WalkDir(src, func(p string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(src, p)
		if d.IsDir() {
			return os.MkdirAll(filepath.Join(dst, rel), 0o755)
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		return os.WriteFile(filepath.Join(dst, rel), b, 0o644)
	})
	if err != nil {
		t.Fatal(err)
	}
	return dst
}

// A tokenizer.json with a catastrophically backtracking regex makes Embed
// fail with the tokenizer's timeout (a server-side fault naming the regex),
// not hang; a cancelled request stops; the pipeline keeps serving.
func TestEmbedHostileTokenizerRegex(t *testing.T) {
	dir := copyModel(t, "embed-mean")
	path := filepath.Join(dir, "tokenizer.json")
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var doc map[string]any
	if err := json.Unmarshal(b, &doc); err != nil {
		t.Fatal(err)
	}
	doc["pre_tokenizer"] = map[string]any{"type": "Sequence", "pretokenizers": []any{
		doc["pre_tokenizer"],
		map[string]any{"type": "Split", "pattern": map[string]any{"Regex": "(a+)+$"}, "behavior": "Isolated", "invert": false},
	}}
	if b, err = json.Marshal(doc); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
	e, err := LoadEmbedder(dir, testOptions(t))
	if err != nil {
		t.Fatal(err)
	}
	defer closeP(t, e)
	text := strings.Repeat("a", 41) + "b"
	_, err = e.Embed(context.Background(), []string{"hello", text}, EmbedOptions{})
	var te *tokenizer.RegexTimeoutError
	if !errors.Is(err, tokenizer.ErrRegexTimeout) || !errors.As(err, &te) || te.HTTPStatus() != 500 {
		t.Fatalf("Embed = %v, want the tokenizer's regex timeout", err)
	}
	if errors.Is(err, ErrInvalidInput) || strings.Contains(err.Error(), text) {
		t.Fatalf("error %q blames the request or echoes it", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := e.Embed(ctx, []string{text}, EmbedOptions{}); !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled Embed = %v", err)
	}
	if res, err := e.Embed(context.Background(), []string{"hello world"}, EmbedOptions{}); err != nil || len(res.Vectors) != 1 {
		t.Fatalf("a harmless text afterwards: %v", err)
	}
}

// Hostile config.json and tokenizer.json files are refused at load with a
// clear error, before any session is made.
func TestLoadRefusesHostileModelFiles(t *testing.T) {
	deep := []byte(strings.Repeat("[", 1_000_000) + strings.Repeat("]", 1_000_000))
	cases := map[string]struct {
		file string
		data []byte
		want string
	}{
		"config.json nested 10^6 deep":    {"config.json", deep, "exceeded max depth"},
		"config.json not JSON":            {"config.json", []byte("\x00\x01 not json"), "config.json"},
		"tokenizer.json nested 10^6 deep": {"tokenizer.json", []byte(`{"model":` + string(deep) + `}`), "exceeded max depth"},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			dir := copyModel(t, "embed-mean")
			if err := os.WriteFile(filepath.Join(dir, c.file), c.data, 0o644); err != nil {
				t.Fatal(err)
			}
			_, err := loadFiles(dir)
			if err == nil || !strings.Contains(err.Error(), c.want) || len(err.Error()) > 1000 {
				t.Fatalf("loadFiles = %v, want a short error saying %q", err, c.want)
			}
		})
	}
	t.Run("config.json too large", func(t *testing.T) {
		dir := copyModel(t, "embed-mean")
		if err := os.Truncate(filepath.Join(dir, "config.json"), MaxConfigBytes+1); err != nil {
			t.Fatal(err)
		}
		if _, err := loadFiles(dir); err == nil || !strings.Contains(err.Error(), "too large for a model config") {
			t.Fatalf("loadFiles = %v", err)
		}
	})
	t.Run("through Load", func(t *testing.T) {
		dir := copyModel(t, "embed-mean")
		if err := os.WriteFile(filepath.Join(dir, "config.json"), deep, 0o644); err != nil {
			t.Fatal(err)
		}
		if p, err := Load(TaskEmbed, dir, testOptions(t)); err == nil || p != nil {
			t.Fatalf("Load = %v, %v", p, err)
		}
	})
}

// backtrackingEmbedder loads the embed-mean fixture with a pre-tokenizer
// regex that backtracks exponentially on a run of a's followed by a b.
func backtrackingEmbedder(t *testing.T) *Embedder {
	t.Helper()
	dir := copyModel(t, "embed-mean")
	path := filepath.Join(dir, "tokenizer.json")
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var doc map[string]any
	if err := json.Unmarshal(b, &doc); err != nil {
		t.Fatal(err)
	}
	doc["pre_tokenizer"] = map[string]any{"type": "Sequence", "pretokenizers": []any{
		doc["pre_tokenizer"],
		map[string]any{"type": "Split", "pattern": map[string]any{"Regex": "(a+)+$"}, "behavior": "Isolated", "invert": false},
	}}
	if b, err = json.Marshal(doc); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
	e, err := LoadEmbedder(dir, testOptions(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { closeP(t, e) })
	return e
}

// TestRegexBudgetPerRequest: a hostile tokenizer.json whose regex takes a
// good part of the match timeout on each text, but never all of it, with a
// request of many such texts: the request fails with the regex budget's
// error after about one budget, instead of costing one slow match per text
// (before: 2048 texts, some 12 CPU-minutes).
func TestRegexBudgetPerRequest(t *testing.T) {
	e := backtrackingEmbedder(t)
	// Find a text that costs one match at least 20 ms, far under the 1 s
	// match timeout. Backtracking doubles the cost with each "a", and a busy
	// machine can stretch one measurement: a text's cost is the least of
	// three tries.
	var text string
	var one time.Duration
	for n := 14; n <= 40; n++ {
		text = strings.Repeat("a", n) + "b"
		one = time.Duration(1<<63 - 1)
		for try := 0; try < 3; try++ {
			start := time.Now()
			if _, err := e.Embed(context.Background(), []string{text}, EmbedOptions{}); err != nil {
				t.Fatalf("one text of %d a's: %v", n, err)
			}
			one = min(one, time.Since(start))
			if one < 20*time.Millisecond {
				break
			}
		}
		if one >= 20*time.Millisecond {
			break
		}
	}
	if one < 20*time.Millisecond || one >= tokenizer.MatchTimeout*9/10 {
		t.Fatalf("no text costs between 20 ms and the match timeout (last: %s)", one)
	}
	// Enough texts for up to a minute of regex time at that cost.
	texts := make([]string, min(MaxEmbedInputs, int(time.Minute/one)+1))
	for i := range texts {
		texts[i] = text
	}
	start := time.Now()
	_, err := e.Embed(context.Background(), texts, EmbedOptions{})
	took := time.Since(start)
	t.Logf("one text: %s; %d texts (%s of regex time unbudgeted) failed after %s: %v", one.Round(time.Millisecond), len(texts), (one * time.Duration(len(texts))).Round(time.Second), took.Round(time.Millisecond), err)
	var be *tokenizer.RegexBudgetError
	if !errors.As(err, &be) || !errors.Is(err, tokenizer.ErrRegexBudget) || be.HTTPStatus() != 500 || !strings.Contains(err.Error(), "(a+)+$") {
		t.Fatalf("Embed of %d backtracking texts = %v, want the regex budget's error naming the pattern", len(texts), err)
	}
	if be.Spent > be.Budget+tokenizer.MatchTimeout {
		t.Errorf("spent %s of regex time against a budget of %s", be.Spent, be.Budget)
	}
	if took > 30*time.Second {
		t.Errorf("the request took %s to fail; its budget is %s", took, be.Budget)
	}
	if res, err := e.Embed(context.Background(), []string{"hello world"}, EmbedOptions{}); err != nil || len(res.Vectors) != 1 {
		t.Fatalf("a harmless text afterwards: %v", err)
	}
}
