// Command gpu-check proves modeld's GPU path on a machine with an NVIDIA GPU,
// in one run well inside ten minutes, and writes what it measured under an
// output folder ($OUT). It is built and packed on a development machine and
// run on the GPU machine, which needs no network, no Go and no npm:
//
//	go run ./scripts/gpu-check pack                  # here: .gpu-check/bundle.tar.xz (~35 MiB)
//	go run ./scripts/gpu-check pack -cuda            # also .gpu-check/cuda/part-N (see below)
//	go run ./scripts/gpu-check run -dry-run -out /tmp/gc   # here, on CPU and llvmpipe
//
// and on the GPU machine, from the repository root with .gpu-check carried:
//
//	python3 -c 'import sys,tarfile; tarfile.open(sys.argv[1]).extractall(sys.argv[2])' .gpu-check/bundle.tar.xz /tmp/gc &&
//	/tmp/gc/gpu-check run -bundle /tmp/gc -out "$OUT"
//
// (python3's tarfile reads .tar.xz where no xz program is installed.)
//
// What run measures, each item recorded as passed, failed or not run with
// the reason: `modeld probe --json` lists the GPU through NVML and through
// Vulkan; a generated llama-architecture GGUF of a few hundred MB (F16,
// random weights, a real shape) loads with every layer on the GPU; the VRAM
// the cache accounts is within 10% of what nvidia-smi shows the runner
// using; greedy output equals the CPU run's; decode tokens/s on the GPU and
// on the CPU; aggregate tokens/s of 1, 4 and 16 concurrent streams.
//
// Which ggml GPU backend: the Vulkan one (libggml-vulkan.so, 55 MB, under
// 6 MiB compressed) runs on the NVIDIA driver's own Vulkan driver and needs
// no CUDA runtime, so it is in the bundle. The CUDA one (libggml-cuda.so,
// 159 MB, 118 MiB compressed) does not fit the 64 MiB a call may carry, and
// it needs the CUDA 13 runtime (libcudart.so.13, libcublas.so.13), which
// the npm package does not ship. pack -cuda cuts it, compressed, into parts
// of at most 40 MiB that earlier calls carry one at a time and stage with
// `gpu-check stage-cuda` into /tmp/modeld-gpu-check-cuda (kept while the
// machine stays warm); run then uses it when every part arrived, its
// checksum is the pinned one, and the CUDA runtime resolves. Embeddings
// through ONNX Runtime's CUDA provider are not run: onnxruntime-node ships
// the CPU build only.
//
// It talks only to 127.0.0.1 and writes only under the output folder and
// temporary directories.
package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"time"
)

func main() {
	if err := run(os.Args[1:], os.Stdout, os.Stderr); err != nil {
		fmt.Fprintln(os.Stderr, "gpu-check:", err)
		os.Exit(1)
	}
}

const usage = `usage:
  gpu-check pack [-out DIR] [-lib-dir DIR] [-cuda]       build the bundle the GPU machine runs
  gpu-check stage-cuda -part FILE [-stage DIR]           keep one carried part of the CUDA backend
  gpu-check run [-bundle DIR] -out DIR [flags]           measure (see -h)`

func run(args []string, stdout, stderr io.Writer) error {
	if len(args) == 0 {
		return errors.New(usage)
	}
	switch args[0] {
	case "pack":
		o, err := parsePack(args[1:], stderr)
		if err != nil {
			return err
		}
		return pack(o, stdout)
	case "stage-cuda":
		o, err := parseStage(args[1:], stderr)
		if err != nil {
			return err
		}
		return stageCUDA(o, stdout)
	case "run":
		o, err := parseRun(args[1:], stderr)
		if err != nil {
			return err
		}
		return measure(o, stdout)
	case "-h", "-help", "--help", "help":
		fmt.Fprintln(stdout, usage)
		return nil
	}
	return fmt.Errorf("unknown command %q\n%s", args[0], usage)
}

type packOptions struct {
	out    string // the bundle folder, ignored by git
	libDir string // the runtime-library root scripts/bootstrap filled
	cuda   bool
}

func parsePack(args []string, stderr io.Writer) (packOptions, error) {
	fs := flag.NewFlagSet("pack", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var o packOptions
	fs.StringVar(&o.out, "out", ".gpu-check", "folder to write the bundle into (the repository's .git/info/exclude gets it)")
	fs.StringVar(&o.libDir, "lib-dir", defaultLibDir(), "runtime libraries installed by scripts/bootstrap (with --test-vulkan, or --gpu vulkan)")
	fs.BoolVar(&o.cuda, "cuda", false, "also cut the CUDA backend into parts for earlier calls to carry (needs scripts/bootstrap --gpu cuda)")
	if err := fs.Parse(args); err != nil {
		return o, err
	}
	if fs.NArg() > 0 {
		return o, fmt.Errorf("pack: unexpected arguments %q", fs.Args())
	}
	if o.out == "" || o.libDir == "" {
		return o, errors.New("pack: -out and -lib-dir must not be empty")
	}
	return o, nil
}

type stageOptions struct {
	part  string
	stage string
}

func parseStage(args []string, stderr io.Writer) (stageOptions, error) {
	fs := flag.NewFlagSet("stage-cuda", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var o stageOptions
	fs.StringVar(&o.part, "part", "", "one part written by pack -cuda (required)")
	fs.StringVar(&o.stage, "stage", defaultCUDAStage, "folder that collects the parts")
	if err := fs.Parse(args); err != nil {
		return o, err
	}
	if o.part == "" || fs.NArg() > 0 {
		return o, errors.New("stage-cuda: give exactly -part FILE")
	}
	return o, nil
}

type runOptions struct {
	bundle string // the unpacked bundle: modeld, gpu-check, lib/, sys/
	out    string
	// dryRun runs everything on this machine: a tiny model, Mesa's
	// software Vulkan device instead of the GPU, no NVML.
	dryRun    bool
	cudaStage string
	timeout   time.Duration
	// The generated model's shape.
	embd, layers, ff, vocab int
	tokens                  int   // max_tokens of each measured completion
	streams                 []int // concurrency levels
}

const defaultCUDAStage = "/tmp/modeld-gpu-check-cuda"

func parseRun(args []string, stderr io.Writer) (runOptions, error) {
	fs := flag.NewFlagSet("run", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var o runOptions
	exe, _ := os.Executable()
	def := "."
	if exe != "" {
		def = dirOf(exe)
	}
	fs.StringVar(&o.bundle, "bundle", def, "the unpacked bundle (default: this program's folder)")
	fs.StringVar(&o.out, "out", os.Getenv("OUT"), "folder for the results (default $OUT)")
	fs.BoolVar(&o.dryRun, "dry-run", false, "run here without a GPU: a tiny model on Mesa's software Vulkan device, no NVML")
	fs.StringVar(&o.cudaStage, "cuda-stage", defaultCUDAStage, "folder holding the staged CUDA backend parts")
	fs.DurationVar(&o.timeout, "timeout", 8*time.Minute, "the whole run's deadline; phases left at it are recorded as not run")
	fs.IntVar(&o.embd, "embd", 1024, "model width")
	fs.IntVar(&o.layers, "layers", 16, "model blocks")
	fs.IntVar(&o.ff, "ff", 2816, "feed-forward width")
	fs.IntVar(&o.vocab, "vocab", 16000, "approximate vocabulary size")
	fs.IntVar(&o.tokens, "tokens", 128, "max_tokens of each measured completion")
	streams := fs.String("streams", "1,4,16", "concurrent stream counts (comma list)")
	if err := fs.Parse(args); err != nil {
		return o, err
	}
	if fs.NArg() > 0 {
		return o, fmt.Errorf("run: unexpected arguments %q", fs.Args())
	}
	var errs []error
	if o.out == "" {
		errs = append(errs, errors.New("-out (or $OUT) is required"))
	}
	if o.timeout <= 0 {
		errs = append(errs, errors.New("-timeout must be positive"))
	}
	for name, v := range map[string]int{"-embd": o.embd, "-layers": o.layers, "-ff": o.ff, "-vocab": o.vocab, "-tokens": o.tokens} {
		if v < 1 {
			errs = append(errs, fmt.Errorf("%s must be at least 1, not %d", name, v))
		}
	}
	if o.embd%64 != 0 {
		errs = append(errs, fmt.Errorf("-embd must be a multiple of 64 (the head width), not %d", o.embd))
	}
	var err error
	if o.streams, err = parseCounts(*streams); err != nil {
		errs = append(errs, fmt.Errorf("-streams: %w", err))
	}
	if o.dryRun {
		// A dry run proves the flow, not the speed: a model llvmpipe runs
		// fast, and two streams at most (several streams at once are slow
		// enough there to reach the runner's stall timeout).
		if !flagSet(fs, "embd") {
			o.embd, o.layers, o.ff, o.vocab = 64, 2, 128, 512
		}
		if !flagSet(fs, "tokens") {
			o.tokens = 16
		}
		if !flagSet(fs, "streams") {
			o.streams = []int{1, 2}
		}
	}
	return o, errors.Join(errs...)
}

func flagSet(fs *flag.FlagSet, name string) bool {
	set := false
	fs.Visit(func(f *flag.Flag) { set = set || f.Name == name })
	return set
}
