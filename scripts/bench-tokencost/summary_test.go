package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestRewriteDoc: the section goes at the end of the Chat part the first
// time, and is replaced in place after, the sections around it kept.
func TestRewriteDoc(t *testing.T) {
	path := filepath.Join(t.TempDir(), "PERFORMANCE.md")
	doc := "# Performance\n\n## Chat (llama.cpp)\n\nchat text\n\n## Task pipelines (ONNX Runtime)\n\nonnx text\n"
	if err := os.WriteFile(path, []byte(doc), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, body := range []string{"\nfirst figures\n", "\nsecond figures\n"} {
		if err := rewriteDoc(path, body); err != nil {
			t.Fatal(err)
		}
		if body[1] == 'f' { // the reading written by hand after the figures stays
			b, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			doc := strings.Replace(string(b), endMarker+"\n", endMarker+"\n\nhand-written reading\n", 1)
			if err := os.WriteFile(path, []byte(doc), 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	got := string(b)
	if !strings.Contains(got, endMarker+"\n\nhand-written reading\n\n## Task pipelines") {
		t.Errorf("the hand-written part is not kept after the figures:\n%s", got)
	}
	if strings.Count(got, section) != 1 || strings.Contains(got, "first figures") || !strings.Contains(got, "second figures") {
		t.Fatalf("doc after two rewrites:\n%s", got)
	}
	chat, sec, onnx := strings.Index(got, "chat text"), strings.Index(got, section), strings.Index(got, "## Task pipelines")
	if !(chat < sec && sec < onnx) || !strings.HasSuffix(got, "onnx text\n") {
		t.Errorf("sections out of place:\n%s", got)
	}
}

// TestBenchTable: figures per token win over per op, and a benchmark whose
// log lines split its name from its figures still gets its row.
func TestBenchTable(t *testing.T) {
	out := "pkg: github.com/modeld/modeld/api\n" +
		"BenchmarkStreamPerToken-2   \t2026/12/01 INFO model loaded id=b/stream\n" +
		"     754\t   1448771 ns/op\t       587.7 B/token\t         4.809 allocs/token\t      5659 ns/token\t  150454 B/op\t    1231 allocs/op\n" +
		"pkg: github.com/modeld/modeld/backends/llama/wire\n" +
		"BenchmarkEventLine-2   \t 3300063\t       402.2 ns/op\t       8 B/op\t       1 allocs/op\n"
	path := filepath.Join(t.TempDir(), "bench.txt")
	if err := os.WriteFile(path, []byte(out), 0o644); err != nil {
		t.Fatal(err)
	}
	got, err := benchTable(path)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"| api `BenchmarkStreamPerToken` | 5659 | 587.7 | 4.809 |", "| backends/llama/wire `BenchmarkEventLine` | 402.2 | 8 | 1 |"} {
		if !strings.Contains(got, want) {
			t.Errorf("table lacks %q:\n%s", want, got)
		}
	}
}

// TestDiff: the busiest threads are the compute threads, a thread born
// during the measurement counts whole, and CPU of threads that exited is
// what the process total has beyond its live threads.
func TestDiff(t *testing.T) {
	before := snapshot{procNs: 0, tasks: map[int]taskCost{1: {cpuNs: 100, vol: 1}, 2: {cpuNs: 50}, 3: {cpuNs: 10, vol: 5}}}
	after := snapshot{procNs: 40 * clockTick, tasks: map[int]taskCost{1: {cpuNs: 900, vol: 2}, 2: {cpuNs: 650, invol: 3},
		3: {cpuNs: 20, vol: 9}, 4: {cpuNs: 5, vol: 1}}}
	c := diff(before, after, 2)
	if c.CPUNs != 800+600+10+5 || c.ComputeCPUNs != 1400 || c.Vol != 1+4+1 || c.ComputeVol != 1 || c.ComputeInvol != 3 || c.Threads != 4 {
		t.Errorf("diff = %+v", c)
	}
	if want := 40*clockTick - c.CPUNs; c.ExitedCPUNs != want {
		t.Errorf("exited %d, want %d", c.ExitedCPUNs, want)
	}
}
