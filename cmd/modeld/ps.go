package main

import (
	"encoding/json"
	"fmt"
	"io"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/modeld/modeld/cache"
)

func init() {
	extraCommands = append(extraCommands, newPsCommand, newUnloadCommand)
}

func newPsCommand(a *app) *cobra.Command {
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "ps",
		Short: "List the models the running daemon has loaded",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			var sys struct {
				Loaded cache.Snapshot `json:"loaded"`
			}
			if err := a.daemonCall(cmd.Context(), "GET", "/v1/system", nil, &sys); err != nil {
				return err
			}
			if asJSON {
				enc := json.NewEncoder(a.stdout)
				enc.SetIndent("", "  ")
				return enc.Encode(sys.Loaded)
			}
			printPs(a.stdout, sys.Loaded, time.Now())
			return nil
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print JSON instead of a table")
	return cmd
}

func printPs(w io.Writer, snap cache.Snapshot, now time.Time) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "ID\tTASK\tBACKEND\tPROCESSOR\tSIZE\tCONTEXT\tSLOTS\tQUEUE\tLOADED\tUNTIL")
	for _, m := range snap.Models {
		ctx := "-"
		if m.Context > 0 {
			ctx = strconv.Itoa(m.Context)
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%d/%d\t%d\t%s\t%s\n", m.ID, m.Task, m.Backend, processor(m),
			humanBytes(m.SizeBytes+m.VRAMBytes), ctx, m.SlotsInUse, m.Slots, m.Queue, ago(m.LoadedAt, now), until(m, now))
	}
	tw.Flush()
	fmt.Fprintf(w, "\n%d loaded", snap.Loaded)
	if snap.MaxLoaded > 0 {
		fmt.Fprintf(w, " of at most %d", snap.MaxLoaded)
	}
	fmt.Fprintf(w, "; RAM %s", humanBytes(snap.RAM.UsedBytes))
	if snap.RAM.BudgetBytes > 0 {
		fmt.Fprintf(w, " of %s", humanBytes(snap.RAM.BudgetBytes))
	}
	for dev, u := range snap.VRAM {
		fmt.Fprintf(w, "; %s %s of %s", dev, humanBytes(u.UsedBytes), humanBytes(u.BudgetBytes))
	}
	fmt.Fprintln(w)
}

// processor says where a model runs, as "cpu", "100% cuda:0" or "40%/60% cpu/cuda:0".
func processor(m cache.ModelStatus) string {
	if m.Device == "" || m.Device == "cpu" {
		return "cpu"
	}
	gpu := int(m.GPUShare*100 + 0.5)
	if gpu >= 100 {
		return "100% " + m.Device
	}
	return fmt.Sprintf("%d%%/%d%% cpu/%s", 100-gpu, gpu, m.Device)
}

func ago(t, now time.Time) string {
	if t.IsZero() {
		return "-"
	}
	return roundDuration(now.Sub(t)) + " ago"
}

func until(m cache.ModelStatus, now time.Time) string {
	switch {
	case m.State != "" && m.State != "ready":
		return m.State
	case m.KeepAlive < 0:
		return "forever"
	case m.ExpiresAt.IsZero():
		return "in use"
	}
	return "in " + roundDuration(m.ExpiresAt.Sub(now))
}

func roundDuration(d time.Duration) string {
	if d < 0 {
		d = 0
	}
	if d >= time.Hour {
		d = d.Round(time.Minute)
	} else {
		d = d.Round(time.Second)
	}
	s := d.String()
	if strings.HasSuffix(s, "m0s") {
		s = strings.TrimSuffix(s, "0s")
	}
	return s
}

func newUnloadCommand(a *app) *cobra.Command {
	var noWait bool
	cmd := &cobra.Command{
		Use:   "unload ID",
		Short: "Unload a model from the running daemon (waits for its in-flight requests)",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			wait := !noWait
			err := a.daemonCall(cmd.Context(), "POST", "/v1/unload", map[string]any{"model": args[0], "wait": wait}, nil)
			if err != nil {
				return err
			}
			fmt.Fprintf(a.stdout, "unloaded %s\n", args[0])
			return nil
		},
	}
	cmd.Flags().BoolVar(&noWait, "no-wait", false, "fail at once if the model is serving requests")
	return cmd
}
