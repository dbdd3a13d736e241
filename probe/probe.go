// Package probe describes the machine modeld runs on: CPU, memory, and the GPUs of
// each backend kind (CUDA, Vulkan, Metal), with a one-line reason for every kind
// that cannot be used. The reading happens once per process, under a timeout, and
// the resulting Info is passed to whoever needs it; nothing here loads a model or
// decides where a model runs.
//
// The platform readers (probe_linux.go, probe_darwin.go) only collect raw readings;
// Decide turns readings into an Info and is tested with made-up readings.
package probe

import (
	"context"
	"fmt"
	"log/slog"
	"runtime"
	"strings"
	"sync"
	"time"
)

// Kind names a compute backend.
type Kind string

const (
	CPU    Kind = "cpu"
	CUDA   Kind = "cuda"
	Vulkan Kind = "vulkan"
	Metal  Kind = "metal"
)

// GPUKinds lists the GPU backend kinds in the order they are preferred.
var GPUKinds = []Kind{CUDA, Metal, Vulkan}

// Info is everything modeld knows about the machine.
type Info struct {
	OS       string          `json:"os"`
	Arch     string          `json:"arch"`
	CPU      CPUInfo         `json:"cpu"`
	Memory   MemoryInfo      `json:"memory"`
	GPUs     []GPU           `json:"gpus"`
	Backends []BackendStatus `json:"backends"`
	// Library is what llama.cpp loaded from the lib dir (nil: not read).
	Library  *Library  `json:"library,omitempty"`
	ProbedAt time.Time `json:"probed_at"`
	Took     Duration  `json:"took"`
}

// CPUInfo describes the processor.
type CPUInfo struct {
	Model    string   `json:"model"`
	Cores    int      `json:"cores"`   // physical cores
	Threads  int      `json:"threads"` // logical CPUs
	Features []string `json:"features"`
}

// MemoryInfo is system RAM in bytes.
type MemoryInfo struct {
	TotalBytes     uint64 `json:"total_bytes"`
	AvailableBytes uint64 `json:"available_bytes"`
	Error          string `json:"error,omitempty"`
}

// GPU is one device seen by one backend kind.
type GPU struct {
	Kind  Kind `json:"kind"`
	Index int  `json:"index"`
	// NativeIndex is the device's position in its driver's own enumeration
	// (NVML's index, vkEnumeratePhysicalDevices' order), which Index is not
	// when the probe skipped a device; a runner is pointed at it.
	NativeIndex       int    `json:"native_index"`
	UUID              string `json:"uuid,omitempty"` // CUDA: NVML's "GPU-…" id
	Name              string `json:"name"`
	TotalBytes        uint64 `json:"total_bytes"`
	FreeBytes         uint64 `json:"free_bytes,omitempty"`
	ComputeCapability string `json:"compute_capability,omitempty"`
	Driver            string `json:"driver,omitempty"`
	Type              string `json:"type,omitempty"` // discrete, integrated, virtual, cpu
	UnifiedMemory     bool   `json:"unified_memory,omitempty"`
}

// ID is the device's name in modeld's output, e.g. "cuda:0" (see
// DeviceName).
func (g GPU) ID() string { return DeviceName(g.Kind, g.Index) }

// BackendStatus says whether a backend kind can run models here and, if not, why.
type BackendStatus struct {
	Kind    Kind   `json:"kind"`
	Devices int    `json:"devices"`
	Usable  bool   `json:"usable"`
	Reason  string `json:"reason,omitempty"`
}

// Backend returns the status of kind k.
func (in Info) Backend(k Kind) BackendStatus {
	for _, b := range in.Backends {
		if b.Kind == k {
			return b
		}
	}
	return BackendStatus{Kind: k, Reason: string(k) + ": not probed"}
}

// Devices returns the GPUs of kind k.
func (in Info) Devices(k Kind) []GPU {
	var out []GPU
	for _, g := range in.GPUs {
		if g.Kind == k {
			out = append(out, g)
		}
	}
	return out
}

// Duration is a time.Duration that marshals as a string such as "12ms".
type Duration time.Duration

func (d Duration) MarshalText() ([]byte, error) { return []byte(time.Duration(d).String()), nil }

// Sources are the raw readers of one platform. Each may be slow or hang (a wedged
// driver); Run calls them concurrently under one timeout.
type Sources struct {
	CPU    func() CPUInfo
	Memory func() (MemoryInfo, error)
	CUDA   func() GPUReading
	Vulkan func() GPUReading
	Metal  func() GPUReading
	// GGML reports which ggml GPU backend libraries are installed next to libllama
	// (e.g. {"cuda": true}); nil means the llama lib dir is absent.
	GGML func() map[Kind]bool
	// Library reads what llama.cpp itself loads from the lib dir (a child
	// process); on macOS its device list is where Metal GPUs come from.
	Library func() Library
	// AllowSoftware makes software devices (a Vulkan device of type "cpu",
	// such as Mesa's llvmpipe) usable GPUs; see Readings.AllowSoftware.
	AllowSoftware bool
}

// GPUReading is what one GPU reader saw.
type GPUReading struct {
	// LibMissing names the system library that is absent (e.g. "libnvidia-ml.so.1");
	// a missing library means "no such GPU", not an error.
	LibMissing string
	// Err is a failure of a present library (driver init error, enumeration error).
	Err     error
	Devices []GPU
	// Unsupported is set on platforms where the kind cannot exist (Metal on Linux).
	Unsupported bool
}

// Readings are the raw inputs of Decide.
type Readings struct {
	GOOS, GOARCH string
	CPU          CPUInfo
	Memory       MemoryInfo
	GPU          map[Kind]GPUReading
	GGML         map[Kind]bool
	GGMLMissing  bool // the llama.cpp lib dir is not installed at all
	Library      *Library
	// AllowSoftware keeps the software devices a reader saw (Type "cpu":
	// a rasterizer running on the CPU, such as Mesa's llvmpipe) as usable
	// GPUs. They run the real offload code path at CPU speed or worse, so
	// this is for tests and demos; off, they are named in the backend's
	// reason and left out of the GPU list.
	AllowSoftware bool
}

// softwareType is the GPU.Type of a device that is the CPU itself.
const softwareType = "cpu"

// withoutSoftware drops the software devices of rd unless allowed; names
// lists the dropped ones.
func withoutSoftware(rd GPUReading, allow bool) (GPUReading, []string) {
	if allow {
		return rd, nil
	}
	var keep []GPU
	var names []string
	for _, g := range rd.Devices {
		if g.Type == softwareType {
			names = append(names, g.Name)
			continue
		}
		keep = append(keep, g)
	}
	rd.Devices = keep
	return rd, names
}

// metalDefault keeps the one Metal device ggml runs on, the system's
// default: the discrete GPU of a Mac that has one besides its integrated
// one, else the first.
func metalDefault(devs []GPU) []GPU {
	if len(devs) <= 1 {
		return devs
	}
	for _, g := range devs {
		if g.Type == "discrete" {
			return []GPU{g}
		}
	}
	return devs[:1]
}

// Decide turns raw readings into an Info: the GPU list and, for every backend
// kind, whether modeld can use it and why not.
func Decide(r Readings) Info {
	in := Info{OS: r.GOOS, Arch: r.GOARCH, CPU: r.CPU, Memory: r.Memory, GPUs: []GPU{}, Library: r.Library}
	if _, ok := r.GPU[Metal]; !ok && r.GOOS == "darwin" {
		// macOS has no Metal reader of its own: llama.cpp's device list is it.
		gpu := map[Kind]GPUReading{Metal: metalFromLibrary(r.Library)}
		for k, v := range r.GPU {
			gpu[k] = v
		}
		r.GPU = gpu
	}
	in.Backends = append(in.Backends, BackendStatus{Kind: CPU, Devices: 1, Usable: true})
	for _, k := range GPUKinds {
		rd, ok := r.GPU[k]
		rd, software := withoutSoftware(rd, r.AllowSoftware)
		st := BackendStatus{Kind: k}
		switch {
		case !ok:
			st.Reason = fmt.Sprintf("%s: not probed", k)
		case rd.Unsupported:
			st.Reason = fmt.Sprintf("%s: not available on %s", k, r.GOOS)
		case rd.LibMissing != "":
			st.Reason = fmt.Sprintf("%s: %s not found", k, rd.LibMissing)
		case rd.Err != nil:
			st.Reason = fmt.Sprintf("%s: %v", k, rd.Err)
		case len(rd.Devices) == 0 && len(software) > 0:
			st.Reason = fmt.Sprintf("%s: only software devices (%s), which --allow-software-gpu makes usable for tests and demos",
				k, strings.Join(software, ", "))
		case len(rd.Devices) == 0:
			st.Reason = fmt.Sprintf("%s: no devices", k)
		}
		if k == Metal {
			rd.Devices = metalDefault(rd.Devices)
		}
		if ok && rd.Err == nil {
			for i, g := range rd.Devices {
				g.Kind, g.Index = k, i
				in.GPUs = append(in.GPUs, g)
			}
			st.Devices = len(rd.Devices)
		}
		if st.Reason == "" {
			// Hardware is there; llama.cpp needs its ggml backend library too.
			// Metal is built into the darwin libraries.
			switch {
			case k == Metal:
				st.Usable = true
			case r.GGMLMissing:
				st.Reason = fmt.Sprintf("%s: llama.cpp libraries not installed (run scripts/bootstrap --gpu %s)", k, k)
			case !r.GGML[k]:
				st.Reason = fmt.Sprintf("%s: ggml %s backend not installed (run scripts/bootstrap --gpu %s)", k, k, k)
			default:
				st.Usable = true
			}
		}
		in.Backends = append(in.Backends, st)
	}
	return in
}

// Run reads every source concurrently, waits at most timeout for each, and decides.
// A source still running at the deadline is reported as timed out; its goroutine
// is left to finish on its own (a hung driver call cannot be interrupted).
func Run(ctx context.Context, src Sources, timeout time.Duration) Info {
	start := time.Now()
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	r := Readings{GOOS: runtime.GOOS, GOARCH: runtime.GOARCH, GPU: map[Kind]GPUReading{}, AllowSoftware: src.AllowSoftware}

	type result struct {
		apply func(*Readings)
	}
	results := make(chan result, 8)
	pending := map[string]func(*Readings, error){}
	launch := func(name string, read func() func(*Readings), onTimeout func(*Readings, error)) {
		pending[name] = onTimeout
		go func() {
			apply := read()
			results <- result{apply: func(rr *Readings) { delete(pending, name); apply(rr) }}
		}()
	}
	if src.CPU != nil {
		launch("cpu", func() func(*Readings) {
			c := src.CPU()
			return func(rr *Readings) { rr.CPU = c }
		}, func(rr *Readings, err error) { rr.CPU.Model = "unknown (" + err.Error() + ")" })
	}
	if src.Memory != nil {
		launch("memory", func() func(*Readings) {
			m, err := src.Memory()
			if err != nil {
				m.Error = err.Error()
			}
			return func(rr *Readings) { rr.Memory = m }
		}, func(rr *Readings, err error) { rr.Memory.Error = err.Error() })
	}
	for k, f := range map[Kind]func() GPUReading{CUDA: src.CUDA, Vulkan: src.Vulkan, Metal: src.Metal} {
		if f == nil {
			continue
		}
		launch(string(k), func() func(*Readings) {
			g := f()
			return func(rr *Readings) { rr.GPU[k] = g }
		}, func(rr *Readings, err error) { rr.GPU[k] = GPUReading{Err: err} })
	}
	if src.Library != nil {
		launch("library", func() func(*Readings) {
			l := src.Library()
			return func(rr *Readings) { rr.Library = &l }
		}, func(rr *Readings, err error) { rr.Library = &Library{Error: err.Error()} })
	}
	if src.GGML != nil {
		launch("ggml", func() func(*Readings) {
			m := src.GGML()
			return func(rr *Readings) { rr.GGML, rr.GGMLMissing = m, m == nil }
		}, func(rr *Readings, err error) { rr.GGMLMissing = true })
	}
	for len(pending) > 0 {
		select {
		case res := <-results:
			res.apply(&r)
		case <-ctx.Done():
			err := fmt.Errorf("probe timed out after %s", timeout)
			for name, onTimeout := range pending {
				slog.Warn("probe source did not answer in time", "source", name, "timeout", timeout)
				onTimeout(&r, err)
			}
			pending = nil
		}
	}
	in := Decide(r)
	in.ProbedAt = start
	in.Took = Duration(time.Since(start))
	return in
}

// Once returns a function that runs the probe on its first call and returns the
// same Info to every later or concurrent caller.
func Once(src Sources, timeout time.Duration) func() Info {
	return sync.OnceValue(func() Info { return Run(context.Background(), src, timeout) })
}

func (d Duration) String() string { return time.Duration(d).String() }

// FreeVRAM reads how many bytes GPU g has free right now (the probe's
// FreeBytes is as old as the probe). ok is false when the device cannot say:
// Vulkan and Metal here, whose callers count their own use against a budget
// instead. Vulkan's free memory would need VK_EXT_memory_budget through
// vkGetPhysicalDeviceMemoryProperties2 on a Vulkan 1.1 instance; that call
// runs in the daemon's process, where a wrong structure layout is a crash,
// so it is left out until it can be checked against a real driver.
func FreeVRAM(g GPU) (free uint64, ok bool, err error) { return freeVRAM(g) }
