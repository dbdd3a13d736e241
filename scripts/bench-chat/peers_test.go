package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestPeersTable: the comparison pools every round's runs per server,
// divides by the base server's medians (per round too), leaves out the
// measures nobody ran, and checks the greedy texts round by round.
func TestPeersTable(t *testing.T) {
	dir := t.TempDir()
	write := func(name string, r httpResult) string {
		path := filepath.Join(dir, name)
		b, err := json.Marshal(r)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, b, 0o644); err != nil {
			t.Fatal(err)
		}
		return path
	}
	base := []string{
		write("a1.json", httpResult{Streams: 4, Decode: []float64{100, 100}, TTFTMs: []float64{10}, Aggregate: []float64{200}, Text: "x"}),
		write("a2.json", httpResult{Streams: 4, Decode: []float64{100}, TTFTMs: []float64{10}, Aggregate: []float64{200}, Text: "x"}),
	}
	other := []string{
		write("b1.json", httpResult{Streams: 4, Decode: []float64{90, 90}, TTFTMs: []float64{20}, Aggregate: []float64{100}, Text: "x"}),
		write("b2.json", httpResult{Streams: 4, Decode: []float64{110}, TTFTMs: []float64{20}, Aggregate: []float64{100}, Text: "y"}),
	}
	doc := filepath.Join(dir, "PERF.md")
	if err := os.WriteFile(doc, []byte("# P\n\n## Chat (llama.cpp)\n\nkept\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	var out strings.Builder
	if err := runPeers([]string{"-side", "llama-server=" + strings.Join(base, ","), "-side", "modeld=" + strings.Join(other, ","), "-doc", doc}, &out); err != nil {
		t.Fatal(err)
	}
	got := out.String()
	for _, want := range []string{
		"| decode, one stream (tok/s) | 100.0 | 90.0 (0.90× [0.90 1.10]) |",
		"| time to first token (ms) | 10.0 | 20.0 (2.00× [2.00 2.00]) |",
		"| 4 concurrent streams, aggregate (tok/s) | 200.0 | 100.0 (0.50× [0.50 0.50]) |",
		"Greedy text of modeld equal to llama-server's: 1 of 2 rounds.",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("missing %q in:\n%s", want, got)
		}
	}
	if strings.Contains(got, "agent loop") || strings.Contains(got, "wide") {
		t.Errorf("a measure nobody ran is in the table:\n%s", got)
	}
	b, _ := os.ReadFile(doc)
	if !strings.Contains(string(b), "kept") || !strings.Contains(string(b), peersHeading) {
		t.Errorf("doc not updated in place:\n%s", b)
	}
	if err := runPeers([]string{"-side", "a=" + base[0]}, &out); err == nil {
		t.Error("one side accepted")
	}
}
