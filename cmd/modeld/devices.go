package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/modeld/modeld/backends"
	"github.com/modeld/modeld/backends/llama/engine"
	"github.com/modeld/modeld/probe"
)

func init() { extraCommands = append(extraCommands, newDevicesCommand) }

// newDevicesCommand is `modeld --lib-dir DIR devices`, the child process the
// probe starts to learn what llama.cpp itself loads from DIR: the CPU variant
// ggml chose and every ggml device (on macOS, the Metal GPU). It prints one
// JSON probe.Library and exits; GPU drivers are opened in it, never in the
// daemon. Like the runner it reads no MODELD_* environment or config file.
// The lib dir comes before the command name, so that a program that is not
// modeld (a test binary) refuses the flag instead of running.
func newDevicesCommand(a *app) *cobra.Command {
	return &cobra.Command{
		Use:                "devices",
		Short:              "Print the ggml devices llama.cpp loads from --lib-dir, as JSON (started by the probe)",
		Hidden:             true,
		DisableFlagParsing: true,
		PersistentPreRunE:  func(*cobra.Command, []string) error { return nil },
		RunE: func(cmd *cobra.Command, args []string) error {
			fs := flag.NewFlagSet("devices", flag.ContinueOnError)
			fs.SetOutput(a.stderr)
			libDir := fs.String("lib-dir", "", "runtime-library root (holds llama/)")
			if err := fs.Parse(args); err != nil {
				return err
			}
			if *libDir == "" {
				return errors.New("devices: --lib-dir is required")
			}
			return json.NewEncoder(a.stdout).Encode(readLibrary(backends.Libs{Root: *libDir}.LlamaDir()))
		},
	}
}

// readLibrary loads llama.cpp from dir in this process and lists what it loaded.
func readLibrary(dir string) probe.Library {
	if err := engine.Init(dir); err != nil {
		return probe.Library{Error: err.Error(), Devices: []probe.LibraryDevice{}}
	}
	lib := probe.Library{CPUVariant: loadedCPUVariant(), Devices: []probe.LibraryDevice{}}
	for _, d := range engine.Devices() {
		lib.Devices = append(lib.Devices, probe.LibraryDevice{
			Name: d.Name, Description: d.Description, Type: d.Type, FreeBytes: d.FreeBytes, TotalBytes: d.TotalBytes,
		})
	}
	return lib
}

// cpuVariantPattern finds the ggml CPU variant in a mapped library's path.
var cpuVariantPattern = regexp.MustCompile(`^libggml-cpu(?:-([A-Za-z0-9_.]+?))?\.(?:so|dylib)$`)

// cpuVariantOf is the CPU variant among the libraries listed in maps (the
// text of /proc/self/maps): ggml opens every libggml-cpu-<variant> to score
// it and keeps only the best one open; a native build (scripts/bootstrap
// --native) has a single libggml-cpu.so. "" when none or several are mapped.
func cpuVariantOf(maps string) string {
	found := ""
	for _, line := range strings.Split(maps, "\n") {
		m := cpuVariantPattern.FindStringSubmatch(filepath.Base(strings.TrimSpace(line)))
		if m == nil {
			continue
		}
		v := m[1]
		if v == "" {
			v = "native"
		}
		if found != "" && found != v {
			return ""
		}
		found = v
	}
	return found
}

// devicesTimeout bounds the device listing (a wedged driver, an emulator).
const devicesTimeout = 2 * time.Minute

// librarySource is the probe's Library reader: `modeld devices` in a child
// process, under the runner wrapper when there is one (an emulated modeld
// cannot start itself otherwise).
func librarySource(cfg Config) func() probe.Library {
	return func() probe.Library {
		exe, err := os.Executable()
		if err != nil {
			return probe.Library{Error: fmt.Sprintf("find own executable: %v", err)}
		}
		ctx, cancel := context.WithTimeout(context.Background(), devicesTimeout)
		defer cancel()
		argv := append(append([]string{}, cfg.RunnerWrapper...), exe, "--lib-dir", cfg.LibDir, "devices")
		cmd := exec.CommandContext(ctx, argv[0], argv[1:]...)
		var out, errb bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &errb
		if err := cmd.Run(); err != nil {
			return probe.Library{Error: fmt.Sprintf("modeld devices: %v: %s", err, lastLine(errb.String()))}
		}
		var lib probe.Library
		if err := json.Unmarshal(out.Bytes(), &lib); err != nil {
			return probe.Library{Error: fmt.Sprintf("modeld devices: %v", err)}
		}
		return lib
	}
}

func lastLine(s string) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	return lines[len(lines)-1]
}
