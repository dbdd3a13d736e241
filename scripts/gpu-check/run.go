package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"time"

	"github.com/modeld/modeld/internal/ggufgen"
)

// Item statuses.
const (
	passed = "passed"
	failed = "failed"
	notRun = "not run"
)

// item is one thing the run checked or measured.
type item struct {
	Name   string         `json:"name"`
	Status string         `json:"status"`
	Detail string         `json:"detail,omitempty"`
	Values map[string]any `json:"values,omitempty"`
}

// report is everything a run writes to gpu-check.json.
type report struct {
	Started  time.Time `json:"started"`
	Took     string    `json:"took"`
	DryRun   bool      `json:"dry_run"`
	Backend  string    `json:"backend"` // the ggml GPU backend used: vulkan or cuda
	Model    string    `json:"model"`   // the generated model's shape and size
	Items    []item    `json:"items"`
	Commit   string    `json:"commit,omitempty"`
	Warnings []string  `json:"warnings,omitempty"`
}

func (r *report) add(it item) { r.Items = append(r.Items, it) }

func (r *report) check(name string, ok bool, detail string, values map[string]any) {
	st := passed
	if !ok {
		st = failed
	}
	r.add(item{Name: name, Status: st, Detail: detail, Values: values})
}

const modelID = "gc/model"

const prompt = "Write a long story about a lighthouse keeper and the sea."

func measure(o runOptions, stdout io.Writer) error {
	start := time.Now()
	ctx, cancel := context.WithTimeout(context.Background(), o.timeout)
	defer cancel()
	if err := os.MkdirAll(o.out, 0o755); err != nil {
		return err
	}
	rep := &report{Started: start, DryRun: o.dryRun}
	var m manifest
	if err := readJSON(filepath.Join(o.bundle, "manifest.json"), &m); err == nil {
		rep.Commit = m.Commit
	}
	err := runChecks(ctx, o, rep)
	if err != nil {
		rep.Warnings = append(rep.Warnings, "stopped early: "+err.Error())
	}
	rep.Took = time.Since(start).Round(time.Second).String()
	if werr := writeReport(o.out, rep); werr != nil {
		return errors.Join(err, werr)
	}
	fmt.Fprint(stdout, renderMarkdown(rep))
	return err
}

func runChecks(ctx context.Context, o runOptions, rep *report) error {
	tmp, err := os.MkdirTemp("", "gpu-check-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)
	modeld := filepath.Join(o.bundle, "modeld")
	if _, err := os.Stat(modeld); err != nil {
		return fmt.Errorf("no modeld in the bundle %s: %w", o.bundle, err)
	}
	env := deviceEnv(os.Environ(), filepath.Join(o.bundle, "sys"), fileExists, o.dryRun)

	// The GPU library: the staged CUDA backend when it is complete and its
	// runtime resolves, else the Vulkan one from the bundle.
	gpuLib, backend, why := filepath.Join(o.bundle, "vulkan", "libggml-vulkan.so"), "vulkan", ""
	if !o.dryRun {
		if lib, err := unstageCUDA(o.cudaStage, tmp); err != nil {
			why = "CUDA backend not used: " + err.Error()
		} else if missing := missingDeps(lib, env); len(missing) > 0 {
			why = "CUDA backend not used: its libraries " + strings.Join(missing, ", ") + " do not resolve here"
		} else {
			gpuLib, backend = lib, "cuda"
		}
	}
	rep.Backend = backend
	if why != "" {
		rep.Warnings = append(rep.Warnings, why)
	}
	cpuRoot, err := libRoot(filepath.Join(tmp, "lib-cpu"), filepath.Join(o.bundle, "lib", "llama"), "")
	if err != nil {
		return err
	}
	gpuRoot, err := libRoot(filepath.Join(tmp, "lib-gpu"), filepath.Join(o.bundle, "lib", "llama"), gpuLib)
	if err != nil {
		return err
	}
	soft := []string{}
	if o.dryRun {
		soft = []string{"--allow-software-gpu"}
	}

	// The probe.
	probeOut, err := runCmd(ctx, env, modeld, append([]string{"probe", "--json", "--lib-dir", gpuRoot, "--home", filepath.Join(tmp, "home")}, soft...)...)
	if err != nil {
		return fmt.Errorf("modeld probe: %w", err)
	}
	if err := os.WriteFile(filepath.Join(o.out, "probe.json"), probeOut, 0o644); err != nil {
		return err
	}
	checkProbe(rep, probeOut, o.dryRun)

	// The model.
	home := filepath.Join(tmp, "home")
	path := filepath.Join(tmp, "model.gguf")
	opts := ggufgen.Options{Vocab: ggufgen.SPM, VocabSize: o.vocab, Embd: o.embd, Layers: o.layers,
		Heads: o.embd / 64, HeadsKV: max(1, o.embd/256), FF: o.ff, Context: 4096, Type: ggufgen.F16, Seed: 11}
	t0 := time.Now()
	if err := ggufgen.WriteFile(path, opts); err != nil {
		return fmt.Errorf("generating the model: %w", err)
	}
	st, err := os.Stat(path)
	if err != nil {
		return err
	}
	rep.Model = fmt.Sprintf("llama architecture, %d wide, %d layers, %d heads (%d KV), FF %d, ~%d tokens of vocabulary, F16, random weights: %.1f MiB (written in %s)",
		opts.Embd, opts.Layers, opts.Heads, opts.HeadsKV, opts.FF, o.vocab, mibf(st.Size()), time.Since(t0).Round(100*time.Millisecond))
	if out, err := runCmd(ctx, append(env, "MODELD_HOME="+home), modeld, "import", path, "--name", modelID); err != nil {
		return fmt.Errorf("modeld import: %w\n%s", err, out)
	}
	_ = os.Remove(path) // the store holds its own copy

	serveArgs := []string{"--chat-slots", fmt.Sprint(maxOf(o.streams)), "--keep-alive", "-1", "--context-size", "2048"}

	// The CPU reference.
	cpu, err := startDaemon(ctx, modeld, env, home, cpuRoot, filepath.Join(o.out, "daemon-cpu.log"), serveArgs...)
	if err != nil {
		return fmt.Errorf("CPU daemon: %w", err)
	}
	cpuRun, err := stream(ctx, cpu.base, o.tokens)
	cpu.stop()
	if err != nil {
		return fmt.Errorf("CPU completion: %w", err)
	}

	// The GPU.
	before, nvmlErr := gpuMemoryUsed(ctx)
	gpu, err := startDaemon(ctx, modeld, env, home, gpuRoot, filepath.Join(o.out, "daemon-gpu.log"), append(serveArgs, soft...)...)
	if err != nil {
		return fmt.Errorf("GPU daemon: %w", err)
	}
	defer gpu.stop()
	gpuRun, err := stream(ctx, gpu.base, o.tokens)
	if err != nil {
		return fmt.Errorf("GPU completion: %w", err)
	}
	sys, err := system(ctx, gpu.base)
	if err != nil {
		return err
	}
	checkOffload(rep, sys)
	after, _ := gpuMemoryUsed(ctx)
	checkVRAM(rep, sys, before, after, nvmlErr)
	checkGreedy(rep, cpuRun, gpuRun)
	rep.check("decode tokens/s, one stream, GPU vs CPU", gpuRun.decodeRate > 0 && cpuRun.decodeRate > 0,
		fmt.Sprintf("%s %.1f tok/s, CPU %.1f tok/s (%.1fx)", rep.Backend, gpuRun.decodeRate, cpuRun.decodeRate, ratio(gpuRun.decodeRate, cpuRun.decodeRate)),
		map[string]any{"gpu_tok_s": gpuRun.decodeRate, "cpu_tok_s": cpuRun.decodeRate})

	agg := map[int]float64{}
	for _, n := range o.streams {
		if ctx.Err() != nil {
			rep.add(item{Name: fmt.Sprintf("%d concurrent streams", n), Status: notRun, Detail: "the run's deadline passed"})
			continue
		}
		a, tokens, err := concurrent(ctx, gpu.base, n, o.tokens)
		if err != nil {
			rep.add(item{Name: fmt.Sprintf("%d concurrent streams", n), Status: failed, Detail: err.Error()})
			continue
		}
		agg[n] = a
		rep.check(fmt.Sprintf("%d concurrent streams", n), a > 0, fmt.Sprintf("%.1f tok/s aggregate (%d tokens)", a, tokens),
			map[string]any{"streams": n, "aggregate_tok_s": a, "tokens": tokens})
	}
	if lo, hi := minOf(o.streams), maxOf(o.streams); agg[lo] > 0 && agg[hi] > 0 && lo != hi {
		rep.check(fmt.Sprintf("aggregate at %d streams / at %d", hi, lo), true, fmt.Sprintf("%.2f", agg[hi]/agg[lo]),
			map[string]any{"ratio": agg[hi] / agg[lo]})
	}
	rep.add(item{Name: "embeddings through ONNX Runtime's CUDA provider", Status: notRun,
		Detail: "not carried: onnxruntime-node ships the CPU build of ONNX Runtime only"})
	return nil
}

// deviceEnv is the environment of modeld on the GPU machine: the bundle's
// system libraries last on the library path (the machine's own first), and
// the NVIDIA Vulkan driver named where the loader would not find it.
func deviceEnv(environ []string, sysDir string, exists func(string) bool, dryRun bool) []string {
	out := make([]string, 0, len(environ)+3)
	ld := ""
	for _, kv := range environ {
		if v, ok := strings.CutPrefix(kv, "LD_LIBRARY_PATH="); ok {
			ld = v
			continue
		}
		out = append(out, kv)
	}
	if ld != "" {
		ld += ":"
	}
	out = append(out, "LD_LIBRARY_PATH="+ld+sysDir, "MODELD_LOG_FORMAT=json")
	if dryRun {
		return out
	}
	if icd := nvidiaICD(exists); icd != "" {
		out = append(out, "VK_DRIVER_FILES="+icd, "VK_ICD_FILENAMES="+icd)
	}
	return out
}

// icdDirs are where the Vulkan loader looks for drivers by itself.
var icdDirs = []string{"/etc/vulkan/icd.d", "/usr/share/vulkan/icd.d", "/usr/local/share/vulkan/icd.d"}

// nvidiaICD returns the NVIDIA Vulkan driver manifest to name explicitly, or
// "" when the loader finds one by itself (or there is none).
func nvidiaICD(exists func(string) bool) string {
	for _, d := range icdDirs {
		if exists(filepath.Join(d, "nvidia_icd.json")) {
			return ""
		}
	}
	for _, p := range []string{"/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json", "/usr/local/nvidia/icd.d/nvidia_icd.json"} {
		if exists(p) {
			return p
		}
	}
	return ""
}

func fileExists(p string) bool { _, err := os.Stat(p); return err == nil }

// libRoot makes a runtime-library root of links: llama/ from the bundle plus
// gpuLib when given.
func libRoot(root, llama, gpuLib string) (string, error) {
	dir := filepath.Join(root, "llama")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", err
	}
	entries, err := os.ReadDir(llama)
	if err != nil {
		return "", err
	}
	for _, e := range entries {
		src := filepath.Join(llama, e.Name())
		if t, err := os.Readlink(src); err == nil {
			src = filepath.Join(llama, t)
		}
		if err := os.Symlink(src, filepath.Join(dir, e.Name())); err != nil {
			return "", err
		}
	}
	if gpuLib != "" {
		if err := os.Symlink(gpuLib, filepath.Join(dir, filepath.Base(gpuLib))); err != nil {
			return "", err
		}
	}
	return root, nil
}

// unstageCUDA joins the staged CUDA parts and unpacks the library into dir.
func unstageCUDA(stage, dir string) (string, error) {
	var m manifest
	if err := readJSON(filepath.Join(stage, "manifest.json"), &m); err != nil {
		return "", fmt.Errorf("no parts staged in %s", stage)
	}
	if have := stagedParts(stage, m); len(have) != len(m.Parts) {
		return "", fmt.Errorf("%d of %d parts staged in %s", len(have), len(m.Parts), stage)
	}
	var xz bytes.Buffer
	for _, p := range m.Parts {
		b, err := os.ReadFile(filepath.Join(stage, p))
		if err != nil {
			return "", err
		}
		xz.Write(b)
	}
	lib := filepath.Join(dir, "libggml-cuda.so")
	// python3's lzma where no xz program is installed.
	cmd := exec.Command("python3", "-c", "import lzma,sys; sys.stdout.buffer.write(lzma.decompress(sys.stdin.buffer.read()))")
	cmd.Stdin = &xz
	out, err := cmd.Output()
	if err != nil {
		return "", fmt.Errorf("unpacking the CUDA backend: %w", err)
	}
	if err := os.WriteFile(lib, out, 0o755); err != nil {
		return "", err
	}
	if sum, err := fileSHA256(lib); err != nil || sum != m.Lib {
		return "", fmt.Errorf("the unpacked CUDA backend's sha256 is %s, the manifest says %s", sum, m.Lib)
	}
	return lib, nil
}

// missingDeps lists the shared libraries lib needs that ldd cannot find.
func missingDeps(lib string, env []string) []string {
	cmd := exec.Command("ldd", lib)
	cmd.Env = env
	out, _ := cmd.CombinedOutput()
	var missing []string
	for _, l := range strings.Split(string(out), "\n") {
		if name, _, ok := strings.Cut(strings.TrimSpace(l), " => not found"); ok {
			missing = append(missing, name)
		}
	}
	return missing
}

func runCmd(ctx context.Context, env []string, name string, args ...string) ([]byte, error) {
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Env = env
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return out, fmt.Errorf("%s %s: %w: %s", filepath.Base(name), strings.Join(args, " "), err, lastLines(stderr.String(), 10))
	}
	return out, nil
}

func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// daemon is a `modeld serve` the run started.
type daemon struct {
	cmd  *exec.Cmd
	base string
	done chan struct{}
}

var listeningRE = regexp.MustCompile(`"msg":"modeld listening","addr":"([^"]+)"`)

// startDaemon starts modeld serve, its log going to logPath, and returns
// once it listens.
func startDaemon(ctx context.Context, modeld string, env []string, home, libDir, logPath string, args ...string) (*daemon, error) {
	logf, err := os.Create(logPath)
	if err != nil {
		return nil, err
	}
	argv := append([]string{"serve", "--listen", "127.0.0.1:0", "--lib-dir", libDir, "--log-level", "debug"}, args...)
	d := &daemon{cmd: exec.Command(modeld, argv...), done: make(chan struct{})}
	d.cmd.Env = append(env, "MODELD_HOME="+home)
	stderr, err := d.cmd.StderrPipe()
	if err != nil {
		logf.Close()
		return nil, err
	}
	if err := d.cmd.Start(); err != nil {
		logf.Close()
		return nil, err
	}
	addr := make(chan string, 1)
	go func() {
		defer close(d.done)
		defer logf.Close()
		sc := bufio.NewScanner(stderr)
		sc.Buffer(make([]byte, 1<<20), 1<<20)
		for sc.Scan() {
			fmt.Fprintln(logf, sc.Text())
			if m := listeningRE.FindStringSubmatch(sc.Text()); m != nil {
				select {
				case addr <- m[1]:
				default:
				}
			}
		}
		_ = d.cmd.Wait()
	}()
	select {
	case a := <-addr:
		d.base = "http://" + a
		return d, nil
	case <-d.done:
		return nil, fmt.Errorf("modeld serve exited before listening (see %s)", logPath)
	case <-ctx.Done():
		d.stop()
		return nil, ctx.Err()
	}
}

// stop ends the daemon with SIGTERM, then SIGKILL after 20 s.
func (d *daemon) stop() {
	select {
	case <-d.done:
		return
	default:
	}
	_ = d.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-d.done:
	case <-time.After(20 * time.Second):
		_ = d.cmd.Process.Kill()
		<-d.done
	}
}

// gpuMemoryUsed is the GPU memory in use now, in bytes, as nvidia-smi
// reads it from NVML (the first GPU).
func gpuMemoryUsed(ctx context.Context) (int64, error) {
	out, err := exec.CommandContext(ctx, "nvidia-smi", "--query-gpu=memory.used", "--format=csv,noheader,nounits").Output()
	if err != nil {
		return 0, fmt.Errorf("nvidia-smi: %w", err)
	}
	var mib int64
	if _, err := fmt.Sscan(strings.SplitN(strings.TrimSpace(string(out)), "\n", 2)[0], &mib); err != nil {
		return 0, fmt.Errorf("nvidia-smi said %q", out)
	}
	return mib << 20, nil
}

func writeReport(dir string, rep *report) error {
	b, err := json.MarshalIndent(rep, "", "  ")
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(dir, "gpu-check.json"), append(b, '\n'), 0o644); err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(dir, "gpu-check.md"), []byte(renderMarkdown(rep)), 0o644)
}

func renderMarkdown(rep *report) string {
	var b strings.Builder
	kind := "GPU machine"
	if rep.DryRun {
		kind = "dry run (Mesa's software Vulkan device, no NVML)"
	}
	fmt.Fprintf(&b, "gpu-check, %s, %s, backend %s, commit %s, took %s\n\nModel: %s\n\n", kind,
		rep.Started.UTC().Format(time.RFC3339), rep.Backend, rep.Commit, rep.Took, rep.Model)
	fmt.Fprintln(&b, "| check | result | detail |")
	fmt.Fprintln(&b, "| --- | --- | --- |")
	for _, it := range rep.Items {
		fmt.Fprintf(&b, "| %s | %s | %s |\n", it.Name, it.Status, strings.ReplaceAll(it.Detail, "|", "/"))
	}
	for _, w := range rep.Warnings {
		fmt.Fprintf(&b, "\nNote: %s\n", w)
	}
	return b.String()
}

func ratio(a, b float64) float64 {
	if b == 0 {
		return 0
	}
	return a / b
}

func maxOf(xs []int) int {
	m := 0
	for _, x := range xs {
		m = max(m, x)
	}
	return m
}

func minOf(xs []int) int {
	m := 0
	for i, x := range xs {
		if i == 0 || x < m {
			m = x
		}
	}
	return m
}
