package llama

import (
	"log/slog"
	"slices"
	"strings"
	"testing"
)

func TestRunnerEnvironDropsSecrets(t *testing.T) {
	in := []string{
		"PATH=/usr/bin", "HOME=/home/u", "LD_LIBRARY_PATH=/opt/lib", "GGML_VK_VISIBLE_DEVICES=0",
		"HF_TOKEN=hf_secret", "HUGGING_FACE_HUB_TOKEN=hf_secret2", "MODELD_API_KEY=k",
		"OPENAI_API_KEY=sk", "AWS_SECRET_ACCESS_KEY=a", "GITHUB_TOKEN=g", "DB_PASSWORD=p", "hf_token=lower",
		"MODELD_HOME=/m", "NOEQUALS",
	}
	got := runnerEnviron(in)
	want := []string{"PATH=/usr/bin", "HOME=/home/u", "LD_LIBRARY_PATH=/opt/lib", "GGML_VK_VISIBLE_DEVICES=0", "MODELD_HOME=/m", "NOEQUALS"}
	if !slices.Equal(got, want) {
		t.Errorf("runnerEnviron = %q, want %q", got, want)
	}
}

// A process started the way runners are sees no HF_TOKEN, whatever the
// daemon's environment holds.
func TestRunnerProcessGetsNoHFToken(t *testing.T) {
	t.Setenv("HF_TOKEN", "hf_must_not_leak")
	t.Setenv("MODELD_API_KEY", "key_must_not_leak")
	for _, env := range [][]string{nil, {"EXTRA=1"}} {
		p, err := startProcess([]string{"/bin/sh", "-c", "env | grep -E '^(PATH|HF_TOKEN|MODELD_API_KEY|EXTRA)='"}, env, slog.New(slog.DiscardHandler), crashReports{}, nil)
		if err != nil {
			t.Fatal(err)
		}
		<-p.done
		out := p.tail.String()
		if !strings.Contains(out, "PATH=") {
			t.Fatalf("no environment printed: %q", out)
		}
		if strings.Contains(out, "must_not_leak") {
			t.Errorf("runner environment holds a secret:\n%s", out)
		}
		if env != nil && !strings.Contains(out, "EXTRA=1") {
			t.Errorf("the runner's own variables are missing:\n%s", out)
		}
	}
}
