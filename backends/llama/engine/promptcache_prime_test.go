package engine

import (
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"testing"
	"time"
)

// waitPrimed waits until m's scheduler has put a read-ahead entry into a
// slot, and returns the tokens it put there (from the log line).
func waitPrimed(t *testing.T, m *Model, log *cacheLog) int {
	t.Helper()
	line := regexp.MustCompile(`prompt cache: primed a slot" slot=\d+ tokens=(\d+)`)
	for deadline := time.Now().Add(60 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		if g := line.FindStringSubmatch(log.String()); g != nil {
			n, _ := strconv.Atoi(g[1])
			if int(m.sch.diskRestored.Load()) != n {
				t.Fatalf("the scheduler counts %d restored tokens, the log %d", m.sch.diskRestored.Load(), n)
			}
			return n
		}
	}
	t.Fatalf("no slot was primed within 60 s:\n%s", log)
	return 0
}

// After an unload or a restart, the model's runner reads the newest entry
// ahead while its KV cache is made, and puts it into an empty slot before
// any request comes: the next turn of the conversation used last then finds
// its prompt in memory, as a warm turn does (no restore in the request),
// with the greedy output of a cold run. The newest entry is the prefix of
// the slot used last, whichever slot that was.
func TestPromptCachePrimedSlotAfterReopen(t *testing.T) {
	path := trainedModel(t)
	dir := filepath.Join(t.TempDir(), "kvcache")
	cm := newCacheModel(t, path, dir, 2)
	m := cm.open(t)
	a := longPrompt(t, m, 300)
	b := slices.Clone(a[:260])
	b[0], b[1] = b[1]+1, b[0] // shares nothing with a
	reqA, reqB := Request{Prompt: a, MaxTokens: 30}, Request{Prompt: b, MaxTokens: 30}
	wantA := cm.cold(t, reqA)

	// a then b then a again: a's slot is the one used last.
	generate(t, m, reqA)
	generate(t, m, reqB)
	generate(t, m, reqA)
	if err := m.Close(); err != nil {
		t.Fatal(err)
	}
	if n := len(entries(t, dir)); n != 2 {
		t.Fatalf("%d cache files after the unload, want 2", n)
	}

	log := captureLog(t)
	m = cm.open(t)
	if n := waitPrimed(t, m, log); n < len(a) {
		t.Fatalf("primed %d tokens, want a's prefix (%d or more)", n, len(a))
	}
	got := generate(t, m, reqA)
	if got.text != wantA.text || got.final.Usage.CachedTokens != len(a)-2 {
		t.Fatalf("after the reopen: %d cached\n%q\nwant %d cached\n%q", got.final.Usage.CachedTokens, got.text, len(a)-2, wantA.text)
	}
	if regexp.MustCompile(`prompt cache: restored`).MatchString(log.String()) {
		t.Fatalf("the request restored from disk although its prefix was primed:\n%s", log)
	}
	// b, on the other slot, is still restored from disk by its request.
	gb := generate(t, m, reqB)
	if wb := cm.cold(t, reqB); gb.text != wb.text || gb.final.Usage.CachedTokens != len(b)-2 {
		t.Fatalf("b after the reopen: %d cached\n%q\nwant %d cached\n%q", gb.final.Usage.CachedTokens, gb.text, len(b)-2, wb.text)
	}
}
