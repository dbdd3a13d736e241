package main

import "testing"

func TestCPUVariantOfMaps(t *testing.T) {
	const lib = "7f3a1c000000-7f3a1c0a0000 r-xp 00000000 08:01 1234 /home/u/.local/share/modeld/lib/llama/"
	for _, tc := range []struct{ maps, want string }{
		{lib + "libggml-cpu-zen4.so\n" + lib + "libggml-cpu-zen4.so\n" + lib + "libggml-base.so\n", "zen4"},
		{lib + "libggml-cpu-armv8.2_2.so\n", "armv8.2_2"},
		{lib + "libggml-cpu.so\n" + lib + "libllama.so.0.0.1\n", "native"},
		{lib + "libggml-base.so\n", ""},
		{lib + "libggml-cpu-zen4.so\n" + lib + "libggml-cpu-haswell.so\n", ""}, // two kept: cannot tell
		{lib + "libggml-cpu-zen4.so.bak\n", ""},
	} {
		if got := cpuVariantOf(tc.maps); got != tc.want {
			t.Errorf("cpuVariantOf(%q) = %q, want %q", tc.maps, got, tc.want)
		}
	}
}
