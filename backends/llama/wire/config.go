package wire

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
)

// Config is what one runner process serves: one model, on one socket.
// It is given only by flags (see Args and ParseArgs); a runner reads no environment
// and no config file.
type Config struct {
	ModelPath string
	Socket    string
	// LibRoot is the runtime-library root; llama.cpp loads from its llama/
	// directory (backends.Libs.LlamaDir).
	LibRoot string
	// CPUVariant is the libggml-cpu-<variant> that ggml keeps on this CPU,
	// as the daemon's probe read it: the runner loads that one alone ("":
	// not known; ggml opens every variant to choose).
	CPUVariant string
	Options    Options
	// ParentPID is the daemon's process id: the runner exits when its parent
	// is another process (0: whatever parent it has at start).
	ParentPID int
	LogLevel  slog.Level
}

// Args renders c as the flags ParseArgs reads.
func (c Config) Args() []string {
	o := c.Options
	kv := []struct {
		name string
		v    any
	}{
		{"model", c.ModelPath}, {"socket", c.Socket}, {"lib-dir", c.LibRoot},
		{"context-size", o.ContextSize}, {"context-cap", o.ContextCap}, {"slots", o.Slots},
		{"threads", o.Threads}, {"batch-threads", o.BatchThreads}, {"gpu-layers", o.GPULayers}, {"batch-size", o.BatchSize},
		{"max-waiting", o.MaxWaiting}, {"lookup", o.Lookup}, {"reuse-answers", o.ReuseAnswers}, {"parent-pid", c.ParentPID}, {"log-level", c.LogLevel.String()},
		{"prompt-cache-dir", o.PromptCacheDir}, {"prompt-cache-max", o.PromptCacheMax}, {"model-sha256", o.ModelSHA256},
		{"mmproj", o.Projector},
	}
	out := make([]string, 0, len(kv)+1)
	for _, f := range kv {
		out = append(out, fmt.Sprintf("--%s=%v", f.name, f.v))
	}
	if c.CPUVariant != "" { // only when known: an older build's runner (a benchmark's baseline) starts without it
		out = append(out, "--cpu-variant="+c.CPUVariant)
	}
	return out
}

// ParseArgs reads the flags of `modeld runner`; usage and flag errors go
// to stderr.
func ParseArgs(args []string, stderr io.Writer) (Config, error) {
	var c Config
	o := &c.Options
	fs := flag.NewFlagSet("modeld runner", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprintln(stderr, "usage: modeld runner --model PATH --socket PATH --lib-dir DIR [flags]")
		fmt.Fprintln(stderr, "Serves one GGUF model to the daemon that started it; not meant to be run by hand.")
		fs.PrintDefaults()
	}
	fs.StringVar(&c.ModelPath, "model", "", "GGUF model file")
	fs.StringVar(&c.Socket, "socket", "", "unix socket to serve on")
	fs.StringVar(&c.LibRoot, "lib-dir", "", "runtime-library root (holding llama/)")
	fs.StringVar(&c.CPUVariant, "cpu-variant", "", "the libggml-cpu-<variant> to load alone (empty: ggml chooses among all)")
	fs.IntVar(&o.ContextSize, "context-size", 0, "context per sequence (0: the model's, bounded by --context-cap)")
	fs.IntVar(&o.ContextCap, "context-cap", 0, "bound of the default context size (0: built-in default)")
	fs.IntVar(&o.Slots, "slots", 0, "sequences decoded together (0: default)")
	fs.IntVar(&o.Threads, "threads", 0, "decode threads (0: measured default)")
	fs.IntVar(&o.BatchThreads, "batch-threads", 0, "threads of multi-token decode steps (0: measured default)")
	fs.IntVar(&o.GPULayers, "gpu-layers", 0, "layers offloaded to a GPU (-1 all, 0 none)")
	fs.IntVar(&o.BatchSize, "batch-size", 0, "most tokens per decode step (0: default)")
	fs.IntVar(&o.MaxWaiting, "max-waiting", 0, "requests that may wait for a slot (0: no bound)")
	fs.StringVar(&o.PromptCacheDir, "prompt-cache-dir", "", "directory of the on-disk prompt cache (empty: none)")
	fs.Int64Var(&o.PromptCacheMax, "prompt-cache-max", 0, "bytes the prompt cache may hold (0: default)")
	fs.StringVar(&o.ModelSHA256, "model-sha256", "", "the model file's sha256 (hex), which keys the prompt cache")
	fs.StringVar(&o.Projector, "mmproj", "", "the model's multimodal projector GGUF (empty: text only)")
	fs.IntVar(&o.Lookup, "lookup", 0, "most tokens a step drafts by prompt lookup (0: off unless a request asks)")
	fs.BoolVar(&o.ReuseAnswers, "reuse-answers", false, "evaluate idle slots' last answers again so that the next turn reuses them")
	fs.IntVar(&c.ParentPID, "parent-pid", 0, "exit when the parent process is no longer this one")
	fs.TextVar(&c.LogLevel, "log-level", slog.LevelInfo, "log level: debug, info, warn or error")
	if err := fs.Parse(args); err != nil {
		return c, err
	}
	var errs []error
	if fs.NArg() > 0 {
		errs = append(errs, fmt.Errorf("unexpected arguments %q", fs.Args()))
	}
	for name, v := range map[string]string{"--model": c.ModelPath, "--socket": c.Socket, "--lib-dir": c.LibRoot} {
		if v == "" {
			errs = append(errs, fmt.Errorf("%s is required", name))
		}
	}
	if err := errors.Join(errs...); err != nil {
		return c, fmt.Errorf("llama runner: %w", err)
	}
	return c, nil
}
