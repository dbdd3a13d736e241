package main

import "os"

// loadedCPUVariant reads which libggml-cpu-<variant>.so this process has mapped.
func loadedCPUVariant() string {
	b, err := os.ReadFile("/proc/self/maps")
	if err != nil {
		return ""
	}
	return cpuVariantOf(string(b))
}
