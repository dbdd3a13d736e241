package main

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/spf13/cobra"
)

func init() {
	extraCommands = append(extraCommands, newWaitCommand)
}

func newWaitCommand(a *app) *cobra.Command {
	var timeout time.Duration
	cmd := &cobra.Command{
		Use:   "wait",
		Short: "Wait until the daemon serving this home answers",
		Long: `Wait until the daemon serving this home (or --host) answers, then exit 0;
exit non-zero after --timeout. For scripts that start "modeld serve &" and then
use it at once.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx, stop := interruptible(cmd)
			defer stop()
			ctx, cancel := context.WithTimeout(ctx, timeout)
			defer cancel()
			base, err := a.waitDaemon(ctx)
			if err != nil {
				return err
			}
			fmt.Fprintf(a.stdout, "modeld is ready at %s\n", base)
			return nil
		},
	}
	cmd.Flags().DurationVar(&timeout, "timeout", time.Minute, "how long to wait")
	return cmd
}

// waitDaemon asks for the daemon serving this home until one answers or ctx ends.
func (a *app) waitDaemon(ctx context.Context) (string, error) {
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	for {
		base, err := a.daemonBase(ctx)
		if err == nil {
			return base, nil
		}
		if !errors.Is(err, errNoDaemon) {
			return "", err
		}
		select {
		case <-ctx.Done():
			return "", fmt.Errorf("no daemon answered in time: %w", err)
		case <-tick.C:
		}
	}
}
