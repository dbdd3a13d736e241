package engine

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/ebitengine/purego"
	yz "github.com/hybridgroup/yzma/pkg/llama"
	"golang.org/x/sys/unix"

	"github.com/modeld/modeld/backends"
	"github.com/modeld/modeld/backends/llama/wire"
)

// ErrNotInitialized is returned by Open before Init succeeded.
var ErrNotInitialized = wire.ErrNotInitialized

// native is the process-wide llama.cpp library. It is package state because
// the library it mirrors is: it can be loaded once per process, from one
// directory.
var native struct {
	once  sync.Once
	ready atomic.Bool // set once Init succeeded
	dir   string
	err   error
	log   *nativeLog
	// mtmd is why llama.cpp's multimodal library could not be loaded from
	// dir (nil: it is loaded); models read images only with it.
	mtmd error
}

// requiredLibs are the files Init needs in the library dir (besides at least
// one libggml-cpu*.so): the .so names on Linux, .dylib on macOS.
var requiredLibs = backends.PlatformLibNames(runtime.GOOS).Llama

// Init loads the llama.cpp libraries from libDir and initialises the ggml
// backends found there. It runs once per process; later calls return the
// first call's result, and a call naming another directory is an error.
// llama.cpp's own log lines go to slog: warnings and errors at their level,
// the rest at debug.
func Init(libDir string) error { return InitCPUVariant(libDir, "") }

// InitCPUVariant is Init told which libggml-cpu-<variant> ggml keeps on
// this CPU (probe.Library.CPUVariant; "" when not known): it loads that CPU
// variant alone instead of opening every one to score it, and falls back to
// ggml's own choice where it cannot (backendload.go). The first call of a
// process decides; a later one's variant is not looked at.
func InitCPUVariant(libDir, cpuVariant string) error {
	native.once.Do(func() {
		native.dir = libDir
		native.err = initNative(libDir, cpuVariant)
		native.ready.Store(native.err == nil)
	})
	if native.err == nil && filepath.Clean(libDir) != filepath.Clean(native.dir) {
		return fmt.Errorf("llama: already initialised from %s, cannot switch to %s", native.dir, libDir)
	}
	return native.err
}

func initNative(dir, cpuVariant string) error {
	if err := checkLibDir(dir); err != nil {
		return err
	}
	if err := yz.Load(dir); err != nil {
		return fmt.Errorf("llama: load libraries from %s: %w", dir, err)
	}
	native.log = &nativeLog{}
	yz.LogSet(purego.NewCallback(native.log.callback))
	// yz.Init, with the backends loaded by loadBackends.
	yz.BackendInit()
	start := time.Now()
	chosen := loadBackends(dir, cpuVariant)
	slog.Debug("llama: ggml backends loaded", "cpu_variant", cpuVariant, "variant_alone", chosen,
		"devices", yz.GGMLBackendDeviceCount(), "ms", time.Since(start).Milliseconds())
	if yz.GGMLBackendDeviceCount() == 0 {
		return fmt.Errorf("llama: no ggml backend device loaded from %s (is a libggml-cpu-*.so variant for this CPU there? run scripts/bootstrap)", dir)
	}
	native.mtmd = loadMultimodal(dir)
	return nil
}

// checkLibDir names the first missing library file, so a missing install
// reads as such instead of as a vague load failure later.
func checkLibDir(dir string) error {
	if dir == "" {
		return errors.New("llama: no library directory given (run scripts/bootstrap)")
	}
	for _, name := range requiredLibs {
		if _, err := os.Stat(filepath.Join(dir, name)); err != nil {
			return fmt.Errorf("llama: %s missing from %s (run scripts/bootstrap): %w", name, dir, err)
		}
	}
	// The prebuilt libraries hold one libggml-cpu-<variant>.so per CPU
	// family, which ggml loads the best of; a native build links
	// libggml-cpu.so.
	cpu, err := filepath.Glob(filepath.Join(dir, "libggml-cpu*.so"))
	if err != nil || len(cpu) == 0 {
		return fmt.Errorf("llama: no libggml-cpu*.so in %s (run scripts/bootstrap)", dir)
	}
	return nil
}

// LibVersion is the version of the loaded llama libraries, read from the
// name libllama.so links to (libllama.v0.4.0.so gives "v0.4.0"), or "" when
// it cannot be told.
func LibVersion() string {
	if !initialized() {
		return ""
	}
	target, err := filepath.EvalSymlinks(filepath.Join(native.dir, requiredLibs[0]))
	if err != nil {
		return ""
	}
	// The prebuilt libraries name the release (libllama.v0.4.0.so); a
	// native build has the soname's numbers (libllama.so.0.0.1).
	base := filepath.Base(target)
	if v, ok := strings.CutPrefix(base, "libllama.so."); ok && v != "" {
		return "native " + v
	}
	v := strings.TrimSuffix(strings.TrimPrefix(base, "libllama."), filepath.Ext(base))
	if v == base || v == "" {
		return ""
	}
	return v
}

// SystemInfo is llama.cpp's system information line (CPU features of the
// selected ggml CPU variant). Init must have succeeded.
func SystemInfo() string {
	if !initialized() {
		return ""
	}
	return yz.PrintSystemInfo()
}

// Device is one ggml backend device.
type Device struct {
	Name        string
	Description string
	Type        string // CPU, GPU, IGPU, ACCEL
	FreeBytes   uint64
	TotalBytes  uint64
}

// Devices lists the ggml backend devices loaded by Init.
func Devices() []Device {
	if !initialized() {
		return nil
	}
	n := yz.GGMLBackendDeviceCount()
	out := make([]Device, 0, n)
	for i := uint64(0); i < n; i++ {
		d := yz.GGMLBackendDeviceGet(i)
		free, total := yz.GGMLBackendDeviceMemory(d)
		out = append(out, Device{
			Name:        yz.GGMLBackendDeviceName(d),
			Description: yz.GGMLBackendDeviceDescription(d),
			Type:        yz.GGMLBackendDevType(d).String(),
			FreeBytes:   free,
			TotalBytes:  total,
		})
	}
	return out
}

// HasGPU reports whether a GPU (or integrated GPU) ggml device is loaded.
func HasGPU() bool {
	for _, d := range Devices() {
		if d.Type == "GPU" || d.Type == "IGPU" {
			return true
		}
	}
	return false
}

func initialized() bool { return native.ready.Load() }

// nativeLog turns llama.cpp's log callback into slog records, one per line.
type nativeLog struct {
	mu    sync.Mutex
	buf   bytes.Buffer
	level int32
	tap   func(level int32, msg string) // sees every line too (Quantize), under mu
}

// setTap makes f see every later log line with its level, until set to nil.
func (l *nativeLog) setTap(f func(level int32, msg string)) {
	l.mu.Lock()
	l.tap = f
	l.mu.Unlock()
}

// ggml log levels (ggml.h).
const (
	logDebug = 1
	logInfo  = 2
	logWarn  = 3
	logError = 4
	logCont  = 5
)

func (l *nativeLog) callback(level int32, text *byte, _ uintptr) uintptr {
	if text == nil {
		return 0
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if level != logCont {
		l.level = level
	}
	l.buf.WriteString(unix.BytePtrToString(text))
	for {
		i := bytes.IndexByte(l.buf.Bytes(), '\n')
		if i < 0 {
			break
		}
		msg := strings.TrimSpace(string(l.buf.Next(i + 1)))
		if msg != "" {
			slog.Log(context.Background(), l.slogLevel(), "llama.cpp: "+msg)
			if l.tap != nil {
				l.tap(l.level, msg)
			}
		}
	}
	return 0
}

func (l *nativeLog) slogLevel() slog.Level {
	switch l.level {
	case logError:
		return slog.LevelError
	case logWarn:
		return slog.LevelWarn
	}
	return slog.LevelDebug
}
