// Command crosscheck checks what scripts/cross built, without running it: that
// each binary is an executable of its platform and asks the dynamic loader for
// nothing the platform does not have. NVML, ONNX Runtime and llama.cpp are
// opened at run time, so none of them may appear among the linked libraries.
//
//	go run ./scripts/crosscheck linux/arm64 dist/modeld-linux-arm64 darwin/arm64 dist/modeld-darwin-arm64
package main

import (
	"debug/buildinfo"
	"debug/elf"
	"debug/macho"
	"errors"
	"fmt"
	"os"
	"runtime/debug"
	"slices"
	"strings"
)

func main() {
	args := os.Args[1:]
	if len(args) == 0 || len(args)%2 != 0 {
		fmt.Fprintln(os.Stderr, "usage: crosscheck PLATFORM BINARY [PLATFORM BINARY]...")
		os.Exit(2)
	}
	failed := false
	for i := 0; i < len(args); i += 2 {
		desc, err := check(args[i], args[i+1])
		if err != nil {
			fmt.Fprintf(os.Stderr, "crosscheck: %s (%s): %v\n", args[i+1], args[i], err)
			failed = true
			continue
		}
		fmt.Printf("crosscheck: %s: %s\n", args[i+1], desc)
	}
	if failed {
		os.Exit(1)
	}
}

// glibcLibs are the libraries a cgo binary of modeld may link on Linux.
var glibcLibs = []string{"libc.so.6", "libm.so.6", "libdl.so.2", "libpthread.so.0", "libresolv.so.2"}

// darwinLibs are the ones it may link on macOS (Go's runtime and crypto/x509).
var darwinLibs = []string{
	"/usr/lib/libSystem.B.dylib", "/usr/lib/libresolv.9.dylib",
	"/System/Library/Frameworks/CoreFoundation.framework/Versions/A/CoreFoundation",
	"/System/Library/Frameworks/Security.framework/Versions/A/Security",
}

// check describes binary path if it is an executable of platform, else says why not.
func check(platform, path string) (string, error) {
	switch platform {
	case "linux/arm64":
		return checkELF(path, elf.EM_AARCH64, "/lib/ld-linux-aarch64.so.1")
	case "linux/amd64":
		return checkELF(path, elf.EM_X86_64, "/lib64/ld-linux-x86-64.so.2")
	case "darwin/arm64":
		return checkMachO(path)
	}
	return "", fmt.Errorf("unknown platform %q (want linux/arm64, linux/amd64 or darwin/arm64)", platform)
}

func checkELF(path string, machine elf.Machine, interp string) (string, error) {
	f, err := elf.Open(path)
	if err != nil {
		return "", fmt.Errorf("not an ELF file: %w", err)
	}
	defer f.Close()
	if f.Machine != machine {
		return "", fmt.Errorf("built for %s, want %s", f.Machine, machine)
	}
	if f.Type != elf.ET_EXEC && f.Type != elf.ET_DYN {
		return "", fmt.Errorf("ELF type %s is not an executable", f.Type)
	}
	var got string
	for _, p := range f.Progs {
		if p.Type == elf.PT_INTERP {
			b := make([]byte, p.Filesz)
			if _, err := p.ReadAt(b, 0); err != nil {
				return "", fmt.Errorf("read interpreter: %w", err)
			}
			got = strings.TrimRight(string(b), "\x00")
		}
	}
	if got != interp {
		return "", fmt.Errorf("interpreter %q, want %q (a cgo build links glibc)", got, interp)
	}
	libs, err := f.ImportedLibraries()
	if err != nil {
		return "", fmt.Errorf("read linked libraries: %w", err)
	}
	if err := only(libs, glibcLibs); err != nil {
		return "", err
	}
	return fmt.Sprintf("ELF %s executable, interpreter %s, links %s", machine, interp, strings.Join(libs, " ")), nil
}

// lcCodeSignature is the load command of a code signature (LC_CODE_SIGNATURE).
const lcCodeSignature = 0x1d

func checkMachO(path string) (string, error) {
	f, err := macho.Open(path)
	if err != nil {
		return "", fmt.Errorf("not a Mach-O file: %w", err)
	}
	defer f.Close()
	if f.Cpu != macho.CpuArm64 {
		return "", fmt.Errorf("built for %s, want arm64", f.Cpu)
	}
	if f.Type != macho.TypeExec {
		return "", fmt.Errorf("Mach-O type %s is not an executable", f.Type)
	}
	signed := false
	for _, l := range f.Loads {
		if raw := l.Raw(); len(raw) >= 4 && f.ByteOrder.Uint32(raw) == lcCodeSignature {
			signed = true
		}
	}
	if !signed {
		return "", errors.New("no code signature: Apple silicon refuses to start an unsigned executable")
	}
	libs, err := f.ImportedLibraries()
	if err != nil {
		return "", fmt.Errorf("read linked libraries: %w", err)
	}
	if err := only(libs, darwinLibs); err != nil {
		return "", err
	}
	bi, err := buildinfo.ReadFile(path)
	if err != nil {
		return "", fmt.Errorf("read build info: %w", err)
	}
	if err := without(bi, nvmlModule); err != nil {
		return "", err
	}
	return "Mach-O arm64 executable, code-signed, without NVML, links " + strings.Join(libs, " "), nil
}

func only(libs, allowed []string) error {
	var extra []string
	for _, l := range libs {
		if !slices.Contains(allowed, l) {
			extra = append(extra, l)
		}
	}
	if extra != nil {
		return fmt.Errorf("links %s, which the platform does not provide (runtime libraries must be opened at run time)", strings.Join(extra, ", "))
	}
	return nil
}

// nvmlModule is NVIDIA's NVML binding: a Linux and Windows matter, kept out
// of the macOS build.
const nvmlModule = "github.com/NVIDIA/go-nvml"

// without fails when module mod is compiled into the binary bi describes.
func without(bi *debug.BuildInfo, mod string) error {
	for _, d := range bi.Deps {
		if d.Path == mod {
			return fmt.Errorf("%s %s is compiled in", d.Path, d.Version)
		}
	}
	return nil
}
