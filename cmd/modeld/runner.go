package main

import (
	"errors"
	"flag"
	"os"
	"os/signal"
	"syscall"

	"github.com/spf13/cobra"

	"github.com/modeld/modeld/backends/llama/runner"
)

func init() { extraCommands = append(extraCommands, newRunnerCommand) }

// newRunnerCommand is `modeld runner`, the child process the daemon starts
// for each loaded GGUF model (llama.StartRunner, which runs this command). It takes every setting
// from its own flags, which the daemon sets; it reads no MODELD_*
// environment and no config file, so it skips the root's configuration
// step. It exits on SIGTERM, when its stdin reaches EOF (the daemon closed
// it or died), or when its parent process changes.
func newRunnerCommand(a *app) *cobra.Command {
	return &cobra.Command{
		Use:                "runner --model PATH --socket PATH --lib-dir DIR [flags]",
		Short:              "Serve one GGUF model to the daemon over a unix socket (started by the daemon)",
		Hidden:             true,
		DisableFlagParsing: true, // runner.Main parses them
		PersistentPreRunE:  func(*cobra.Command, []string) error { return nil },
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
			defer ignoreLateSignals(stop)
			err := runner.Main(ctx, args, os.Stdin, a.stdout, a.stderr)
			if errors.Is(err, flag.ErrHelp) {
				return nil
			}
			return err
		},
	}
}

// ignoreLateSignals ends a NotifyContext (stop) on the way out of a runner
// by ignoring its signals instead of restoring their default action: the
// daemon stops a runner with SIGTERM and closes its stdin, and a runner
// that saw the EOF first must not die of the SIGTERM still on its way
// while it exits (signal.Ignore sets SIG_IGN before it drops the handler,
// so no moment is left where the default applies).
func ignoreLateSignals(stop func()) {
	signal.Ignore(os.Interrupt, syscall.SIGTERM)
	stop()
}
