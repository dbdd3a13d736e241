package probe

import (
	"os"
	"path/filepath"
	"runtime"
	"sort"

	"github.com/shirou/gopsutil/v4/cpu"
	"github.com/shirou/gopsutil/v4/mem"
	xcpu "golang.org/x/sys/cpu"
)

// DefaultSources returns the readers of this platform. llamaLibDir is where
// scripts/bootstrap put the llama.cpp libraries; it tells which ggml GPU backends
// are installed.
func DefaultSources(llamaLibDir string) Sources {
	s := platformSources()
	s.CPU = readCPU
	s.Memory = readMemory
	s.GGML = func() map[Kind]bool { return readGGML(llamaLibDir) }
	return s
}

func readCPU() CPUInfo {
	c := CPUInfo{Threads: runtime.NumCPU(), Features: simdFeatures()}
	if infos, err := cpu.Info(); err == nil && len(infos) > 0 {
		c.Model = infos[0].ModelName
	}
	if n, err := cpu.Counts(false); err == nil && n > 0 {
		c.Cores = n
	} else {
		c.Cores = c.Threads
	}
	return c
}

// simdFeatures lists the vector extensions that matter for inference kernels.
func simdFeatures() []string {
	var f []string
	add := func(ok bool, name string) {
		if ok {
			f = append(f, name)
		}
	}
	switch runtime.GOARCH {
	case "amd64", "386":
		add(xcpu.X86.HasSSE42, "sse4.2")
		add(xcpu.X86.HasAVX, "avx")
		add(xcpu.X86.HasAVX2, "avx2")
		add(xcpu.X86.HasFMA, "fma")
		add(xcpu.X86.HasAVX512F, "avx512f")
		add(xcpu.X86.HasAVX512BW, "avx512bw")
		add(xcpu.X86.HasAVX512VNNI, "avx512vnni")
		add(xcpu.X86.HasAVX512BF16, "avx512bf16")
		add(xcpu.X86.HasAVXVNNI, "avxvnni")
		add(xcpu.X86.HasAMXTile, "amx")
	case "arm64":
		add(xcpu.ARM64.HasASIMD, "neon")
		add(xcpu.ARM64.HasASIMDDP, "dotprod")
		add(xcpu.ARM64.HasSVE, "sve")
		add(xcpu.ARM64.HasSVE2, "sve2")
		add(xcpu.ARM64.HasI8MM, "i8mm")
	}
	if f == nil {
		f = []string{}
	}
	return f
}

func readMemory() (MemoryInfo, error) {
	v, err := mem.VirtualMemory()
	if err != nil {
		return MemoryInfo{}, err
	}
	return MemoryInfo{TotalBytes: v.Total, AvailableBytes: v.Available}, nil
}

// readGGML reports the ggml GPU backend libraries present in dir, or nil when dir
// holds no llama.cpp libraries at all.
func readGGML(dir string) map[Kind]bool {
	if _, err := os.Stat(filepath.Join(dir, "libllama.so")); err != nil {
		if _, err := os.Stat(filepath.Join(dir, "libllama.dylib")); err != nil {
			return nil
		}
	}
	out := map[Kind]bool{}
	for _, k := range []Kind{CUDA, Vulkan, Metal} {
		for _, ext := range []string{".so", ".dylib"} {
			if _, err := os.Stat(filepath.Join(dir, "libggml-"+string(k)+ext)); err == nil {
				out[k] = true
			}
		}
	}
	return out
}

// sortedKinds is used for stable output.
func sortedKinds(m map[Kind]bool) []string {
	var out []string
	for k, ok := range m {
		if ok {
			out = append(out, string(k))
		}
	}
	sort.Strings(out)
	return out
}
