package engine

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/modeld/modeld/internal/ggufgen"
	"github.com/modeld/modeld/internal/testenv"
)

// trainedModel is the trained model of the shared assets (testenv.TrainedModel).
func trainedModel(t *testing.T) string { return testenv.TrainedModel(t) }

func fileSHA256(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}

// cacheModel is a model file with the options that keep its prompts in dir.
type cacheModel struct {
	path string
	opts Options
}

func newCacheModel(t *testing.T, path, dir string, slots int) cacheModel {
	return cacheModel{path: path, opts: Options{Slots: slots, ContextSize: 512,
		PromptCacheDir: dir, ModelSHA256: fileSHA256(t, path)}}
}

// open loads the model; closing it (at the end of the test at the latest)
// saves its slots' prefixes.
func (c cacheModel) open(t *testing.T) *Model {
	t.Helper()
	initLib(t)
	m, err := open(c.path, c.opts, Hooks{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = m.Close() })
	return m
}

// cold is the output of req on the model with no cache of any kind.
func (c cacheModel) cold(t *testing.T, req Request) result {
	t.Helper()
	o := c.opts
	o.PromptCacheDir = ""
	m, err := open(c.path, o, Hooks{})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	r := generate(t, m, req)
	if r.final.Usage.CachedTokens != 0 {
		t.Fatalf("a cold run reports %d cached tokens", r.final.Usage.CachedTokens)
	}
	return r
}

// cacheLog captures the process's log lines for a test.
type cacheLog struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *cacheLog) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *cacheLog) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

func captureLog(t *testing.T) *cacheLog {
	l := &cacheLog{}
	old := slog.Default()
	slog.SetDefault(slog.New(slog.NewTextHandler(l, &slog.HandlerOptions{Level: slog.LevelDebug})))
	t.Cleanup(func() { slog.SetDefault(old) })
	return l
}

func entries(t *testing.T, dir string) []string {
	t.Helper()
	m, err := filepath.Glob(filepath.Join(dir, "*.kv"))
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// longPrompt is a prompt of about n tokens of m's vocabulary.
func longPrompt(t *testing.T, m *Model, n int) []int32 {
	t.Helper()
	words := strings.Fields("once upon a time there was a little girl named Lily she liked to play in the park with her dog and her friend Tom one day")
	var b strings.Builder
	for i := 0; ; i++ {
		b.WriteString(words[i%len(words)] + " ")
		if ids := tokenize(t, m, b.String()); len(ids) >= n {
			return ids[:n]
		}
	}
}

// Restored state gives the greedy output of a cold run, byte for byte:
// after the model was closed (an unload, a restart) and after its only
// slot was taken by another prompt (an eviction), on the trained model and
// on a random-weight F16 one.
func TestPromptCacheRestoreEqualsColdRun(t *testing.T) {
	models := map[string]string{
		"stories260K": trainedModel(t),
		"random F16":  genModel(t, ggufgen.Options{Type: ggufgen.F16, Context: 1024}),
	}
	for name, path := range models {
		t.Run(name, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "kvcache")
			cm := newCacheModel(t, path, dir, 1)
			m := cm.open(t)
			prompt := longPrompt(t, m, 300)
			req := Request{Prompt: prompt, MaxTokens: 40}
			want := cm.cold(t, req)
			if len(want.tokens) < 20 {
				t.Fatalf("the cold run gave %d tokens; the test needs a longer answer", len(want.tokens))
			}

			if got := generate(t, m, req); got.text != want.text {
				t.Fatalf("first run with the cache on:\n%q\nwant\n%q", got.text, want.text)
			}
			if err := m.Close(); err != nil {
				t.Fatal(err)
			}
			if n := len(entries(t, dir)); n != 1 {
				t.Fatalf("%d cache files after the unload, want 1", n)
			}

			// After the unload: the whole prompt but two tokens comes from disk.
			m = cm.open(t)
			got := generate(t, m, req)
			if got.text != want.text || got.final.Usage.CachedTokens != len(prompt)-2 {
				t.Fatalf("after the unload: %d cached\n%q\nwant %d cached\n%q", got.final.Usage.CachedTokens, got.text, len(prompt)-2, want.text)
			}
			// A prompt that shares the first 250 tokens: those come from disk.
			branch := slices.Concat(prompt[:250], longPrompt(t, m, 40)[5:])
			m2 := cm.open(t) // a fresh model, its slot empty
			gb := generate(t, m2, Request{Prompt: branch, MaxTokens: 40})
			if wb := cm.cold(t, Request{Prompt: branch, MaxTokens: 40}); gb.text != wb.text || gb.final.Usage.CachedTokens != 250 {
				t.Fatalf("branch: %d cached\n%q\nwant 250 cached\n%q", gb.final.Usage.CachedTokens, gb.text, wb.text)
			}
			_ = m2.Close()

			// An eviction, in a cache of its own: another prompt takes the
			// only slot (which saves the first prompt), then the first comes
			// back and is restored from disk.
			ce := newCacheModel(t, path, filepath.Join(t.TempDir(), "evict"), 1)
			me := ce.open(t)
			generate(t, me, req)
			other := slices.Clone(prompt[:200])
			other[0], other[1] = other[1]+1, other[0]
			_ = generate(t, me, Request{Prompt: other, MaxTokens: 5})
			if err := me.sch.disk.Sync(context.Background()); err != nil {
				t.Fatal(err)
			}
			if n := len(entries(t, ce.opts.PromptCacheDir)); n != 1 {
				t.Fatalf("%d cache files after the eviction, want 1", n)
			}
			got = generate(t, me, req)
			if got.text != want.text || got.final.Usage.CachedTokens != len(prompt)-2 {
				t.Fatalf("after an eviction: %d cached\n%q\nwant %d cached\n%q", got.final.Usage.CachedTokens, got.text, len(prompt)-2, want.text)
			}
		})
	}
}

// The attacker's side: a cache file that was truncated, flipped, swapped in
// from another model or replaced by a link is refused with a log line, and
// the request is served by a cold prefill with the cold run's output.
func TestPromptCacheHostileFileServedCold(t *testing.T) {
	path := genModel(t, ggufgen.Options{Type: ggufgen.F16, Context: 1024})
	otherPath := genModel(t, ggufgen.Options{Type: ggufgen.F16, Context: 1024, Seed: 99})
	attacks := map[string]func(t *testing.T, file, otherFile string){
		"truncated": func(t *testing.T, file, _ string) {
			fi, _ := os.Stat(file)
			if err := os.Truncate(file, fi.Size()/2); err != nil {
				t.Fatal(err)
			}
		},
		"bit flipped": func(t *testing.T, file, _ string) {
			b, _ := os.ReadFile(file)
			b[len(b)/2] ^= 0x01
			if err := os.WriteFile(file, b, 0o600); err != nil {
				t.Fatal(err)
			}
		},
		"swapped from another model": func(t *testing.T, file, otherFile string) {
			if err := os.Rename(otherFile, file); err != nil {
				t.Fatal(err)
			}
		},
		"a link to another file": func(t *testing.T, file, _ string) {
			target := filepath.Join(t.TempDir(), "target.kv")
			if err := os.Rename(file, target); err != nil {
				t.Fatal(err)
			}
			if err := os.Symlink(target, file); err != nil {
				t.Fatal(err)
			}
		},
		"readable by others": func(t *testing.T, file, _ string) {
			if err := os.Chmod(file, 0o644); err != nil {
				t.Fatal(err)
			}
		},
	}
	for name, attack := range attacks {
		t.Run(name, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "kvcache")
			cm := newCacheModel(t, path, dir, 1)
			om := newCacheModel(t, otherPath, filepath.Join(t.TempDir(), "other"), 1)
			m := cm.open(t)
			prompt := longPrompt(t, m, 200)
			req := Request{Prompt: prompt, MaxTokens: 30}
			want := cm.cold(t, req)
			generate(t, m, req)
			_ = m.Close()
			o := om.open(t)
			generate(t, o, req)
			_ = o.Close()
			files, others := entries(t, dir), entries(t, om.opts.PromptCacheDir)
			if len(files) != 1 || len(others) != 1 {
				t.Fatalf("cache files %v and %v, want one each", files, others)
			}
			attack(t, files[0], others[0])
			log := captureLog(t)
			m = cm.open(t)
			got := generate(t, m, req)
			if got.text != want.text || got.final.Usage.CachedTokens != 0 {
				t.Fatalf("%d cached\n%q\nwant a cold run's\n%q", got.final.Usage.CachedTokens, got.text, want.text)
			}
			if !strings.Contains(log.String(), "cache file refused") {
				t.Fatalf("no log line about the refused file:\n%s", log.String())
			}
		})
	}
}

// The cache survives with its bound: files never exceed PromptCacheMax.
func TestPromptCacheBound(t *testing.T) {
	path := genModel(t, ggufgen.Options{Type: ggufgen.F16, Context: 1024})
	dir := filepath.Join(t.TempDir(), "kvcache")
	cm := newCacheModel(t, path, dir, 1)
	m := cm.open(t)
	var prompts [][]int32
	for i := range 4 {
		p := longPrompt(t, m, 100+10*i)
		p[0] = int32(5 + i) // no two share a prefix
		prompts = append(prompts, p)
	}
	generate(t, m, Request{Prompt: prompts[0], MaxTokens: 2})
	_ = m.Close()
	one := entries(t, dir)
	if len(one) != 1 {
		t.Fatalf("%d files, want 1", len(one))
	}
	fi, _ := os.Stat(one[0])
	cm.opts.PromptCacheMax = 2*fi.Size() + fi.Size()/2
	m = cm.open(t)
	for _, p := range prompts[1:] {
		generate(t, m, Request{Prompt: p, MaxTokens: 2})
	}
	_ = m.Close()
	var total int64
	for _, f := range entries(t, dir) {
		fi, _ := os.Stat(f)
		total += fi.Size()
	}
	if total > cm.opts.PromptCacheMax || len(entries(t, dir)) < 1 {
		t.Fatalf("%d files of %d bytes, bound %d", len(entries(t, dir)), total, cm.opts.PromptCacheMax)
	}
}
