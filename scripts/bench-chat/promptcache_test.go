package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestCacheSummaryRatiosAgainstWarm(t *testing.T) {
	dir := t.TempDir()
	turns := filepath.Join(dir, "turns.json")
	lines := `{"kind":"cold","ms":10000,"prompt":11000,"cached":0}
{"kind":"warm","ms":1000,"prompt":11000,"cached":10990}
{"kind":"warm","ms":1200,"prompt":11000,"cached":10990}
{"kind":"warm","ms":800,"prompt":11000,"cached":10990}
{"kind":"restart","ms":1200,"prompt":11000,"cached":10990}
{"kind":"unload","ms":1500,"prompt":11000,"cached":10990}
`
	if err := os.WriteFile(turns, []byte(lines), 0o600); err != nil {
		t.Fatal(err)
	}
	doc := filepath.Join(dir, "PERFORMANCE.md")
	if err := os.WriteFile(doc, []byte("# Performance\n\n## Other\n\nkept\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	var out strings.Builder
	if err := runCacheSummary([]string{"-turns", turns, "-doc", doc}, &out); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"| 10000 | 10.00× |", "| 1200 | 1.20× |", "| 1500 | 1.50× |", "- restart: 1.20× (met)", "- unload: 1.50× (not met)"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("summary lacks %q:\n%s", want, out.String())
		}
	}
	b, _ := os.ReadFile(doc)
	if !strings.Contains(string(b), "## Other\n\nkept") || !strings.Contains(string(b), "## Prompt cache on disk") {
		t.Errorf("doc:\n%s", b)
	}
	if err := runCacheSummary([]string{"-turns", turns + ".none"}, &out); err == nil {
		t.Error("a missing file was summarized")
	}
}
