package gatewaytest

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// ready: every host's scrape was read in full.
func ready(errs map[string]error) bool {
	for _, err := range errs {
		if err != nil {
			return false
		}
	}
	return true
}

// TestIdleHosts: two daemons with nothing loaded are ready (every series
// the config reads is there) and score as idle: their gauges are 0 and the
// picks spread over both.
func TestIdleHosts(t *testing.T) {
	a, b := startHost(t, "a", []string{"t/chat"}), startHost(t, "b", []string{"t/chat"})
	p := newPicker(t, a, b)
	errs := p.Refresh(t.Context())
	for name, err := range errs {
		if err != nil {
			t.Errorf("%s, nothing loaded: the picker's scrape failed: %v", name, err)
		}
	}
	for _, h := range p.Hosts() {
		m := h.Metrics()
		if m.WaitingQueueSize != 0 || m.RunningRequestsSize != 0 || m.KVCacheUsagePercent != 0 || m.UpdateTime.IsZero() {
			t.Errorf("%s, nothing loaded: %+v, want fresh zeros", h.Name, m)
		}
		if len(m.ActiveModels) != 0 || m.MaxActiveModels < 1 {
			t.Errorf("%s, nothing loaded: active %v of %d, want none of at least 1", h.Name, m.ActiveModels, m.MaxActiveModels)
		}
	}
	got := picks(t, p, "t/chat", 40, distinct)
	if got["a"] == 0 || got["b"] == 0 {
		t.Errorf("40 picks over two idle hosts: %v, want both used", got)
	}
}

// TestBusyHost: with four streams on a (two running, two waiting), new
// requests go to b; with a idle again they go to both. A host with nothing
// loaded beside a busy one scores as idle too.
func TestBusyHost(t *testing.T) {
	a, b := startHost(t, "a", []string{"t/chat"}), startHost(t, "b", []string{"t/chat"})
	chat(t, a, "t/chat")
	p := newPicker(t, a, b)
	stop := busy(t, a, "t/chat", 4)
	refreshUntil(t, p, "a busy", func(errs map[string]error) bool {
		m := p.Host("a").Metrics()
		return ready(errs) && m.RunningRequestsSize == 2 && m.WaitingQueueSize == 2
	})
	if got := picks(t, p, "t/chat", 20, distinct); got["b"] != 20 {
		t.Errorf("a busy, b with nothing loaded: picks %v, want all 20 on b", got)
	}
	chat(t, b, "t/chat")
	refreshUntil(t, p, "b holding t/chat", func(map[string]error) bool {
		_, ok := p.Host("b").Metrics().ActiveModels["t/chat"]
		return ok
	})
	if got := picks(t, p, "t/chat", 20, distinct); got["b"] != 20 {
		t.Errorf("a busy, b idle with the model: picks %v, want all 20 on b", got)
	}
	stop()
	refreshUntil(t, p, "a idle", func(errs map[string]error) bool {
		m := p.Host("a").Metrics()
		return ready(errs) && m.RunningRequestsSize == 0 && m.WaitingQueueSize == 0 && m.KVCacheUsagePercent == 0
	})
	if got := picks(t, p, "t/chat", 40, distinct); got["a"] == 0 || got["b"] == 0 {
		t.Errorf("both idle again: picks %v, want both used; a %+v, b %+v", got, p.Host("a").Metrics(), p.Host("b").Metrics())
	}
}

// TestModelOnOneHost: a model loaded on a only goes to a, while the model
// both hold spreads; b's store does not have it (model placement).
func TestModelOnOneHost(t *testing.T) {
	a, b := startHost(t, "a", []string{"t/chat", "t/coder"}), startHost(t, "b", []string{"t/chat"})
	chat(t, a, "t/coder")
	chat(t, a, "t/chat")
	chat(t, b, "t/chat")
	p := newPicker(t, a, b)
	refreshUntil(t, p, "the loaded models", func(errs map[string]error) bool {
		_, coder := p.Host("a").Metrics().ActiveModels["t/coder"]
		_, chatB := p.Host("b").Metrics().ActiveModels["t/chat"]
		return ready(errs) && coder && chatB
	})
	if got := picks(t, p, "t/coder", 20, distinct); got["a"] != 20 {
		t.Errorf("t/coder, loaded on a only: picks %v, want all 20 on a", got)
	}
	if got := picks(t, p, "t/chat", 40, distinct); got["a"] == 0 || got["b"] == 0 {
		t.Errorf("t/chat, loaded on both: picks %v, want both used", got)
	}
}

// TestSharedPrefix: requests that share a long prefix (an agent's system
// prompt and history) follow the first one to its host, until that host is
// saturated.
func TestSharedPrefix(t *testing.T) {
	a, b := startHost(t, "a", []string{"t/chat"}), startHost(t, "b", []string{"t/chat"})
	chat(t, a, "t/chat")
	chat(t, b, "t/chat")
	p := newPicker(t, a, b)
	refreshUntil(t, p, "both ready", ready)
	system := strings.Repeat("You are a careful coding agent working in a large repository. ", 60)
	turn := func(i int) []string { return []string{system, "earlier answer", "request " + string(rune('a'+i%26))} }
	first, err := p.Pick(t.Context(), "t/chat", turn(0)...)
	if err != nil {
		t.Fatal(err)
	}
	if got := picks(t, p, "t/chat", 20, turn); got[first.Name] != 20 {
		t.Errorf("20 turns sharing the first one's prefix: picks %v, want all on %s", got, first.Name)
	}
	d, other := a, "b"
	if first.Name == "b" {
		d, other = b, "a"
	}
	busy(t, d, "t/chat", 4)
	refreshUntil(t, p, first.Name+" saturated", func(errs map[string]error) bool {
		m := p.Host(first.Name).Metrics()
		return ready(errs) && m.RunningRequestsSize == 2 && m.WaitingQueueSize == 2
	})
	if got := picks(t, p, "t/chat", 20, turn); got[other] != 20 {
		t.Errorf("the prefix's host saturated: picks %v, want all 20 on %s", got, other)
	}
}

// TestRefusedScrape: a host whose /metrics needs a key the picker cannot
// send is never preferred, not even over a saturated host: its scrape is
// an error, it shows no model, and model affinity outweighs its zeros.
func TestRefusedScrape(t *testing.T) {
	keyFile := filepath.Join(t.TempDir(), "key")
	if err := os.WriteFile(keyFile, []byte("mk-gateway-test-7f3a\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	a, r := startHost(t, "a", []string{"t/chat"}), startHost(t, "r", []string{"t/chat"}, "--api-key-file", keyFile)
	chat(t, a, "t/chat")
	p := newPicker(t, a, r)
	busy(t, a, "t/chat", 4)
	errs := refreshUntil(t, p, "a saturated", func(errs map[string]error) bool {
		m := p.Host("a").Metrics()
		return errs["a"] == nil && m.RunningRequestsSize == 2 && m.WaitingQueueSize == 2
	})
	if errs["r"] == nil || !strings.Contains(errs["r"].Error(), "401") {
		t.Errorf("r's scrape without the key: %v, want a 401", errs["r"])
	}
	if got := picks(t, p, "t/chat", 30, distinct); got["a"] != 30 {
		t.Errorf("a saturated, r refusing scrapes: picks %v, want all 30 on a", got)
	}
}

// TestDocumentedConfig: the config these tests run is the one
// docs/SCALING.md gives (less injectDefaults, which this release lacks).
func TestDocumentedConfig(t *testing.T) {
	doc := readFile(t, "../../docs/SCALING.md")
	for _, line := range bytes.Split(ModeldConfig, []byte("\n")) {
		if len(bytes.TrimSpace(line)) > 0 && !bytes.Contains(doc, line) {
			t.Errorf("docs/SCALING.md lacks the config line %q", line)
		}
	}
}
