package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/modeld/modeld/backends"
	"github.com/modeld/modeld/probe"
)

func newProbeCommand(a *app) *cobra.Command {
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "probe",
		Short: "Show the CPU, memory and GPUs modeld sees, and which backends are usable",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			libs := backends.Libs{Root: a.cfg.LibDir}
			info := probe.Run(context.Background(), probeSources(a.cfg), a.cfg.ProbeTimeout)
			if asJSON {
				enc := json.NewEncoder(a.stdout)
				enc.SetIndent("", "  ")
				return enc.Encode(struct {
					probe.Info
					Libraries []backends.LibStatus `json:"libraries"`
				}{info, libs.Check()})
			}
			printProbe(a.stdout, info, libs.Check())
			return nil
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print JSON instead of a table")
	return cmd
}

// probeSources are this machine's probe readers, with the configuration's
// say on software GPUs; serve and the probe command decide alike.
func probeSources(cfg Config) probe.Sources {
	src := probe.DefaultSources(backends.Libs{Root: cfg.LibDir}.LlamaDir())
	src.AllowSoftware = cfg.AllowSoftwareGPU
	src.Library = librarySource(cfg)
	return src
}

func printProbe(w io.Writer, in probe.Info, libs []backends.LibStatus) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintf(tw, "Platform\t%s/%s\n", in.OS, in.Arch)
	if in.Library != nil {
		fmt.Fprintf(tw, "llama.cpp\t%s\n", in.Library.Variant())
	}
	fmt.Fprintf(tw, "CPU\t%s\n", in.CPU.Model)
	fmt.Fprintf(tw, "\t%d cores, %d threads, %s\n", in.CPU.Cores, in.CPU.Threads, strings.Join(in.CPU.Features, " "))
	mem := fmt.Sprintf("%s total, %s available", humanBytes(int64(in.Memory.TotalBytes)), humanBytes(int64(in.Memory.AvailableBytes)))
	if in.Memory.Error != "" {
		mem = "unknown: " + in.Memory.Error
	}
	fmt.Fprintf(tw, "Memory\t%s\n", mem)
	fmt.Fprintln(tw)
	fmt.Fprintln(tw, "BACKEND\tUSABLE\tDEVICES\tSTATUS")
	for _, b := range in.Backends {
		status := "ok"
		if !b.Usable {
			status = b.Reason
		}
		fmt.Fprintf(tw, "%s\t%s\t%d\t%s\n", b.Kind, yesNo(b.Usable), b.Devices, status)
	}
	if len(in.GPUs) > 0 {
		fmt.Fprintln(tw)
		fmt.Fprintln(tw, "DEVICE\tNAME\tMEMORY\tFREE\tDETAILS")
		for _, g := range in.GPUs {
			details := strings.TrimSpace(strings.Join([]string{g.Type, ccString(g.ComputeCapability), g.Driver}, " "))
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", g.ID(), g.Name, humanBytes(int64(g.TotalBytes)), humanBytes(int64(g.FreeBytes)), details)
		}
	}
	fmt.Fprintln(tw)
	fmt.Fprintln(tw, "LIBRARY\tINSTALLED\tDIR\tSTATUS")
	for _, l := range libs {
		status := l.Version
		if !l.Installed {
			status = "missing " + strings.Join(l.Missing, ", ") + "; run " + l.Fix
		} else if len(l.GPU) > 0 {
			status += " (+" + strings.Join(l.GPU, ", ") + ")"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", l.Name, yesNo(l.Installed), l.Dir, status)
	}
	tw.Flush()
	for _, l := range libs {
		if l.NativeBuild != nil {
			fmt.Fprintf(w, "%s build for this CPU: %s\n", l.Name, nativeBuildLine(*l.NativeBuild, time.Now()))
		}
	}
	fmt.Fprintf(w, "\nprobed in %s\n", in.Took.String())
}

// nativeBuildLine says how far a native build of llama.cpp is, at now.
func nativeBuildLine(b backends.NativeBuild, now time.Time) string {
	var s string
	switch b.State {
	case backends.BuildRunning:
		s = fmt.Sprintf("running, %d %%", b.Percent)
		if !b.Started.IsZero() {
			s += fmt.Sprintf(" after %s", now.Sub(b.Started).Round(time.Second))
		}
		s += "; models loaded after it is installed use it"
	default:
		s = fmt.Sprintf("%s at %d %%", b.State, b.Percent)
		if b.Message != "" {
			s += ": " + b.Message
		}
	}
	if b.Log != "" {
		s += " (log " + b.Log + ")"
	}
	return s
}

func ccString(cc string) string {
	if cc == "" {
		return ""
	}
	return "cc " + cc
}

func yesNo(b bool) string {
	if b {
		return "yes"
	}
	return "no"
}

// humanBytes prints a byte count with binary units (1.5 GiB).
func humanBytes(n int64) string {
	const unit = 1024
	if n < unit {
		return fmt.Sprintf("%d B", n)
	}
	div, exp := int64(unit), 0
	for m := n / unit; m >= unit; m /= unit {
		div *= unit
		exp++
	}
	return fmt.Sprintf("%.1f %ciB", float64(n)/float64(div), "KMGTPE"[exp])
}
