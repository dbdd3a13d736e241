package main

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/modeld/modeld/cache"
)

func TestPrintPs(t *testing.T) {
	now := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	snap := cache.Snapshot{
		Loaded: 2, MaxLoaded: 3,
		RAM: cache.Usage{UsedBytes: 3 << 30, BudgetBytes: 16 << 30},
		Models: []cache.ModelStatus{
			{ID: "qwen/chat:q4", Task: "chat", Backend: "llama", State: "ready", Device: "cuda:0", GPUShare: 0.52,
				SizeBytes: 1 << 30, Slots: 4, SlotsInUse: 1, LoadedAt: now.Add(-90 * time.Second), ExpiresAt: now.Add(4 * time.Minute)},
			{ID: "bge", Task: "embed", Backend: "onnx", State: "ready", Device: "cpu", SizeBytes: 2 << 30, Slots: 1,
				LoadedAt: now.Add(-time.Hour), KeepAlive: -1},
		},
	}
	var buf bytes.Buffer
	printPs(&buf, snap, now)
	out := buf.String()
	for _, want := range []string{"48%/52% cpu/cuda:0", "1/4", "1m30s ago", "in 4m", "forever", "2 loaded of at most 3", "RAM 3.0 GiB of 16.0 GiB"} {
		if !strings.Contains(out, want) {
			t.Errorf("ps output lacks %q:\n%s", want, out)
		}
	}
}

func TestPsWithoutDaemon(t *testing.T) {
	_, err := runCLI(t, map[string]string{"MODELD_HOME": t.TempDir(), "MODELD_LISTEN": "127.0.0.1:1"}, "ps")
	if err == nil || !strings.Contains(err.Error(), "modeld is not running for the home") || !strings.Contains(err.Error(), "none answers at http://127.0.0.1:1") ||
		!strings.Contains(err.Error(), "start one with `modeld serve --home") {
		t.Fatalf("err = %v", err)
	}
}
