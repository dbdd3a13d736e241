// Command modeld is a local model inference daemon: it serves chat (llama.cpp) and
// task pipelines (ONNX Runtime) over the OpenAI HTTP API on loopback, and manages
// the local model store. This package reads the configuration once and wires the
// packages together; it owns no model logic.
package main

import (
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"runtime/debug"

	"github.com/spf13/cobra"
)

// version is set at build time with -ldflags "-X main.version=...".
var version = ""

func modeldVersion() string {
	if version != "" {
		return version
	}
	v := "dev"
	if bi, ok := debug.ReadBuildInfo(); ok {
		for _, s := range bi.Settings {
			if s.Key == "vcs.revision" && len(s.Value) >= 12 {
				v = "dev-" + s.Value[:12]
			}
		}
	}
	return v
}

// exitError carries a process exit code through cobra.
type exitError struct{ code int }

func (e exitError) Error() string { return fmt.Sprintf("exit %d", e.code) }

func main() {
	root := newRootCommand(os.Stdout, os.Stderr, os.Getenv)
	if err := root.Execute(); err != nil {
		var ee exitError
		if errors.As(err, &ee) {
			os.Exit(ee.code)
		}
		fmt.Fprintln(os.Stderr, "modeld:", err)
		os.Exit(1)
	}
}

// app is what every subcommand gets: the configuration and the output streams.
type app struct {
	getenv func(string) string
	stdout io.Writer
	stderr io.Writer
	cfg    Config
	log    *slog.Logger
	base   string // the daemon's base URL, once daemonBase has found it
}

func newRootCommand(stdout, stderr io.Writer, getenv func(string) string) *cobra.Command {
	a := &app{getenv: getenv, stdout: stdout, stderr: stderr}
	root := &cobra.Command{
		Use:   "modeld",
		Short: "Local model inference daemon with an OpenAI-compatible API",
		Long: `modeld serves local models over the OpenAI HTTP API on loopback:
chat through llama.cpp (GGUF) and embed / classify / rerank / summarize through
ONNX Runtime, with a local model store.

Every setting is a flag, a MODELD_* environment variable, or a key of the JSON
config file ($MODELD_HOME/config.json); flags win over the environment, the
environment over the file. "modeld serve --help" lists them all.`,
		SilenceUsage:  true,
		SilenceErrors: true,
		PersistentPreRunE: func(cmd *cobra.Command, _ []string) error {
			cfg, err := loadConfig(cmd.Flags(), a.getenv)
			if err != nil {
				return err
			}
			a.cfg = cfg
			a.log = newLogger(a.stderr, cfg)
			return nil
		},
	}
	root.Version = modeldVersion()
	root.SetVersionTemplate("modeld {{.Version}}\n")
	root.SetOut(stdout)
	root.SetErr(stderr)
	addFlags(root.PersistentFlags(), true)
	root.AddCommand(newServeCommand(a), newProbeCommand(a), newVersionCommand(a))
	for _, add := range extraCommands {
		root.AddCommand(add(a))
	}
	return root
}

// extraCommands are subcommands added by other files of this package (store, ps).
var extraCommands []func(*app) *cobra.Command

func newLogger(w io.Writer, cfg Config) *slog.Logger {
	var level slog.Level
	_ = level.UnmarshalText([]byte(cfg.LogLevel))
	opts := &slog.HandlerOptions{Level: level}
	if cfg.LogFormat == "json" {
		return slog.New(slog.NewJSONHandler(w, opts))
	}
	return slog.New(slog.NewTextHandler(w, opts))
}

func newVersionCommand(a *app) *cobra.Command {
	return &cobra.Command{
		Use:   "version",
		Short: "Print the modeld version",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			fmt.Fprintf(a.stdout, "modeld %s\n", modeldVersion())
			return nil
		},
	}
}
