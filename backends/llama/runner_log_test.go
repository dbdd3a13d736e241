package llama

import (
	"bytes"
	"encoding/json"
	"log/slog"
	"strings"
	"testing"
)

// A runner's JSON log records become records of the daemon's log (the
// runner's level and message, its attributes in the group "runner", no key
// twice); other output is logged as it is, at debug; the output tail of an
// exit error reads as text.
func TestRunnerOutputIsStructured(t *testing.T) {
	var buf bytes.Buffer
	log := slog.New(slog.NewJSONHandler(&buf, &slog.HandlerOptions{Level: slog.LevelDebug})).With("model", "t/chat")
	script := `echo '{"time":"2026-01-01T00:00:00Z","level":"DEBUG","msg":"llama.cpp: load_tensors: CPU model buffer size = 1.2 MiB"}' >&2
echo '{"time":"2026-01-01T00:00:00Z","level":"WARN","msg":"slow step","model":"inner","took_ms":12}' >&2
echo 'GGML_ASSERT(x) failed' >&2`
	p, err := startProcess([]string{"/bin/sh", "-c", script}, nil, log, crashReports{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	<-p.done
	var recs []map[string]any
	for _, line := range strings.Split(strings.TrimSpace(buf.String()), "\n") {
		var rec map[string]any
		if err := json.Unmarshal([]byte(line), &rec); err != nil {
			t.Fatalf("not JSON: %s", line)
		}
		if strings.Count(line, `"model":`) > 1 && rec["runner"] == nil {
			t.Errorf("a key twice: %s", line)
		}
		recs = append(recs, rec)
	}
	if len(recs) != 3 {
		t.Fatalf("%d records for 3 lines:\n%s", len(recs), buf.String())
	}
	if r := recs[0]; r["level"] != "DEBUG" || r["msg"] != "llama.cpp: load_tensors: CPU model buffer size = 1.2 MiB" || r["line"] != nil || r["model"] != "t/chat" {
		t.Errorf("llama.cpp's record = %v", r)
	}
	runner, _ := recs[1]["runner"].(map[string]any)
	if r := recs[1]; r["level"] != "WARN" || r["msg"] != "slow step" || r["model"] != "t/chat" || runner["model"] != "inner" || runner["took_ms"] != 12.0 {
		t.Errorf("the runner's own record = %v", r)
	}
	if r := recs[2]; r["level"] != "DEBUG" || r["msg"] != "llama runner output" || r["line"] != "GGML_ASSERT(x) failed" {
		t.Errorf("native output = %v", r)
	}
	tail := p.tail.String()
	for _, want := range []string{"DEBUG llama.cpp: load_tensors", "WARN slow step model=inner took_ms=12", "GGML_ASSERT(x) failed"} {
		if !strings.Contains(tail, want) {
			t.Errorf("output tail lacks %q:\n%s", want, tail)
		}
	}
	if strings.Contains(tail, `"msg"`) {
		t.Errorf("output tail shows JSON:\n%s", tail)
	}
}
