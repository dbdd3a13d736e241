package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"

	"github.com/spf13/cobra"

	"github.com/modeld/modeld/backends"
	"github.com/modeld/modeld/backends/llama"
	"github.com/modeld/modeld/backends/llama/runner"
	"github.com/modeld/modeld/models"
)

func init() { extraCommands = append(extraCommands, newQuantizeCommand) }

// newQuantizeCommand is `modeld quantize`, the child process `modeld import
// --quantize` starts to run llama.cpp's quantizer (runner.QuantizeMain).
// Like the runner it takes every setting from its own flags and reads no
// MODELD_* environment or config file.
func newQuantizeCommand(a *app) *cobra.Command {
	return &cobra.Command{
		Use:                "quantize --lib-dir DIR --in PATH --out PATH --type TYPE",
		Short:              "Write a quantized copy of a GGUF model (started by modeld import --quantize)",
		Hidden:             true,
		DisableFlagParsing: true,
		PersistentPreRunE:  func(*cobra.Command, []string) error { return nil },
		RunE: func(cmd *cobra.Command, args []string) error {
			err := runner.QuantizeMain(args, a.stdout, a.stderr)
			if errors.Is(err, flag.ErrHelp) {
				return nil
			}
			return err
		},
	}
}

// quantizer is the store's Quantizer: `modeld quantize` in a child process,
// under the runner wrapper when there is one.
func (a *app) quantizer() (models.Quantizer, error) {
	exe, err := os.Executable()
	if err != nil {
		return nil, fmt.Errorf("find own executable: %w", err)
	}
	q := llama.Quantizer{
		Command: append(append([]string{}, a.cfg.RunnerWrapper...), exe, "quantize"),
		LibDir:  backends.Libs{Root: a.cfg.LibDir}.LlamaDir(),
		Threads: a.cfg.BatchThreads,
	}
	return func(ctx context.Context, src, dst, typ string, progress func(done, total int)) error {
		return q.Quantize(ctx, src, dst, typ, progress)
	}, nil
}
