package placement

import "github.com/modeld/modeld/probe"

// UnifiedMemory reports whether GPU g computes in the system's RAM rather
// than memory of its own, on platform goos: every Metal device of macOS
// (Apple silicon, where the Metal package is the one modeld installs), and
// any device the probe saw as such. Its "VRAM" is then RAM the CPU can no
// longer use.
func UnifiedMemory(goos string, g probe.GPU) bool {
	return g.UnifiedMemory || (goos == "darwin" && g.Kind == probe.Metal)
}

// unifiedRAM is what a plan on GPU g holds of RAM on platform goos: on
// unified memory its GPU part is RAM too, so the RAM budget is the one
// budget the GPU and the CPU share. The VRAM stays counted against the
// device's own limit (the working set macOS allows the GPU).
func unifiedRAM(goos string, g probe.GPU, ram, vram int64) int64 {
	if UnifiedMemory(goos, g) {
		return ram + vram
	}
	return ram
}
