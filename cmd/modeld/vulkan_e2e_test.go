package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/modeld/modeld/cache"
	"github.com/modeld/modeld/internal/ggufgen"
	"github.com/modeld/modeld/internal/testenv"
)

// The GPU offload path on Mesa's software Vulkan device (llvmpipe), run by
// real daemons with --allow-software-gpu and the pinned ggml Vulkan backend:
// device choice, full offload, layer split and refusal under a VRAM budget,
// the cache's VRAM accounting, the CPU fallback when the library is gone, and
// the GPU allowlist. llvmpipe is slow, so the models are a few MB at most and
// the checks are of correctness, never of speed.

const (
	vkInstall     = "apt-get install mesa-vulkan-drivers libvulkan1"
	vkBootstrap   = "scripts/bootstrap --test-vulkan"
	vkDevice      = "vulkan:0"
	vkChatModel   = "t/vk-chat" // 2 layers, 64 wide: under 1 MB
	vkBigModel    = "t/vk-big"  // 8 layers, 64 wide: ~1.5 MB, for the split
	vkMaxTokens   = 16
	vkGreedyInput = "Tell me about the sea."
)

// vkLibRoot builds a runtime-library root of links to the installed
// libraries: llama/ as scripts/bootstrap made it plus, when withVulkan, the
// ggml Vulkan backend that scripts/bootstrap --test-vulkan put apart.
func vkLibRoot(t *testing.T, withVulkan bool) string {
	t.Helper()
	lib := testenv.LibDir(t)
	root := t.TempDir()
	llama := filepath.Join(root, "llama")
	if err := os.Mkdir(llama, 0o755); err != nil {
		t.Fatal(err)
	}
	entries, err := os.ReadDir(testenv.LlamaDir(t))
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		if err := os.Symlink(filepath.Join(lib, "llama", e.Name()), filepath.Join(llama, e.Name())); err != nil {
			t.Fatal(err)
		}
	}
	if withVulkan {
		vk := filepath.Join(lib, "llama-vulkan", "libggml-vulkan.so")
		if _, err := os.Stat(vk); err != nil {
			t.Fatalf("the ggml Vulkan backend is missing (%v); install it with %s", err, vkBootstrap)
		}
		if err := os.Symlink(vk, filepath.Join(llama, "libggml-vulkan.so")); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Symlink(filepath.Join(lib, "onnxruntime"), filepath.Join(root, "onnxruntime")); err != nil {
		t.Fatal(err)
	}
	return root
}

// vkDaemon is a `modeld serve` child whose every log line is kept.
type vkDaemon struct {
	t    *testing.T
	cmd  *exec.Cmd
	base string
	addr string
	home string

	mu      sync.Mutex
	logs    bytes.Buffer
	changed chan struct{} // closed and replaced on every new line
	exited  chan struct{}
}

func startVKDaemon(t *testing.T, home, libRoot string, args ...string) *vkDaemon {
	t.Helper()
	return startVKDaemonEnv(t, nil, home, libRoot, args...)
}

// startVKDaemonEnv is startVKDaemon with env added to the daemon's environment.
func startVKDaemonEnv(t *testing.T, env []string, home, libRoot string, args ...string) *vkDaemon {
	t.Helper()
	argv := append([]string{"-test.run=^$", "--", "serve", "--listen", "127.0.0.1:0", "--lib-dir", libRoot,
		"--log-level", "debug", "--keep-alive", "-1"}, args...)
	d := &vkDaemon{t: t, home: home, changed: make(chan struct{}), exited: make(chan struct{})}
	d.cmd = exec.Command(os.Args[0], argv...)
	d.cmd.Env = append(append(os.Environ(), env...), "MODELD_TEST_MAIN=1", "MODELD_HOME="+home, "MODELD_LOG_FORMAT=json")
	stderr, err := d.cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := d.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		sc := bufio.NewScanner(stderr)
		sc.Buffer(make([]byte, 1<<20), 1<<20)
		for sc.Scan() {
			d.mu.Lock()
			d.logs.WriteString(sc.Text() + "\n")
			close(d.changed)
			d.changed = make(chan struct{})
			d.mu.Unlock()
		}
		_ = d.cmd.Wait()
		close(d.exited)
	}()
	t.Cleanup(d.stop)
	m := d.waitLog(regexp.MustCompile(`"msg":"modeld listening","addr":"([^"]+)"`))
	d.addr = m[1]
	d.base = "http://" + d.addr
	return d
}

// waitLog waits for a log line matching re and returns its submatches; the
// daemon's exit, or hangCeiling without such a line, fails the test.
func (d *vkDaemon) waitLog(re *regexp.Regexp) []string {
	d.t.Helper()
	deadline := time.After(hangCeiling)
	for {
		d.mu.Lock()
		m := re.FindStringSubmatch(d.logs.String())
		ch := d.changed
		d.mu.Unlock()
		if m != nil {
			return m
		}
		select {
		case <-ch:
		case <-d.exited:
			d.t.Fatalf("daemon exited before logging %s:\n%s", re, d.log())
		case <-deadline:
			d.t.Fatalf("no log line matching %s within %s:\n%s", re, hangCeiling, d.log())
		}
	}
}

func (d *vkDaemon) log() string {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.logs.String()
}

// stop ends the daemon with SIGTERM and waits for it, so the next daemon
// can take the same home.
func (d *vkDaemon) stop() {
	select {
	case <-d.exited:
		return
	default:
	}
	_ = d.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-d.exited:
	case <-time.After(hangCeiling):
		_ = d.cmd.Process.Kill()
		<-d.exited
		d.t.Errorf("daemon still running %s after SIGTERM", hangCeiling)
	}
}

// vkSystem is the part of /v1/system these tests read.
type vkSystem struct {
	Probe struct {
		Backends []struct {
			Kind    string `json:"kind"`
			Usable  bool   `json:"usable"`
			Devices int    `json:"devices"`
			Reason  string `json:"reason"`
		} `json:"backends"`
		GPUs []struct {
			Kind       string `json:"kind"`
			Index      int    `json:"index"`
			Name       string `json:"name"`
			Type       string `json:"type"`
			TotalBytes uint64 `json:"total_bytes"`
		} `json:"gpus"`
	} `json:"probe"`
	Loaded struct {
		Models []struct {
			cache.ModelStatus
			Estimate vkEstimate `json:"estimate"`
		} `json:"models"`
		VRAM map[string]cache.Usage `json:"vram"`
	} `json:"loaded"`
	Fallbacks map[string]gpuFallback `json:"gpu_fallbacks"`
}

type vkParts struct {
	Weights  int64 `json:"weights_bytes"`
	KV       int64 `json:"kv_bytes"`
	Compute  int64 `json:"compute_bytes"`
	Overhead int64 `json:"overhead_bytes"`
}

func (p vkParts) total() int64 { return p.Weights + p.KV + p.Compute + p.Overhead }

type vkEstimate struct {
	VRAM      vkParts `json:"vram"`
	GPULayers int     `json:"gpu_layers"`
	Layers    int     `json:"layers"`
}

func (d *vkDaemon) system() vkSystem {
	d.t.Helper()
	res, err := http.Get(d.base + "/v1/system")
	if err != nil {
		d.t.Fatal(err)
	}
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	if err != nil || res.StatusCode != 200 {
		d.t.Fatalf("GET /v1/system = %d, %v: %s", res.StatusCode, err, b)
	}
	var sys vkSystem
	if err := json.Unmarshal(b, &sys); err != nil {
		d.t.Fatalf("/v1/system: %v: %s", err, b)
	}
	return sys
}

func (s vkSystem) backend(kind string) (usable bool, reason string) {
	for _, b := range s.Probe.Backends {
		if b.Kind == kind {
			return b.Usable, b.Reason
		}
	}
	return false, "not listed"
}

// model returns the loaded model id's status, failing when it is not loaded.
func (d *vkDaemon) model(sys vkSystem, id string) (cache.ModelStatus, vkEstimate) {
	d.t.Helper()
	for _, m := range sys.Loaded.Models {
		if m.ID == id {
			return m.ModelStatus, m.Estimate
		}
	}
	d.t.Fatalf("%s is not loaded: %+v", id, sys.Loaded.Models)
	return cache.ModelStatus{}, vkEstimate{}
}

// greedy is a temperature-0 chat completion's text and token count.
type greedy struct {
	Text   string
	Tokens int
}

func (d *vkDaemon) chat(model string) greedy {
	d.t.Helper()
	var out struct {
		Choices []struct {
			Message struct{ Content string } `json:"message"`
		} `json:"choices"`
		Usage struct {
			CompletionTokens int `json:"completion_tokens"`
		} `json:"usage"`
	}
	post(d.t, d.base, "/v1/chat/completions", map[string]any{
		"model": model, "temperature": 0, "max_tokens": vkMaxTokens,
		"messages": []map[string]string{{"role": "user", "content": vkGreedyInput}},
	}, 200, &out)
	if len(out.Choices) != 1 || out.Usage.CompletionTokens == 0 {
		d.t.Fatalf("%s: no completion: %+v", model, out)
	}
	return greedy{out.Choices[0].Message.Content, out.Usage.CompletionTokens}
}

// checkDeviceNames: every device /v1/system names (the loaded models', the
// VRAM accounts', the probe's GPUs') is in modeld's one vocabulary, the
// model runs on vulkan:0 by every account, and a request to it says so in
// X-Modeld-Device.
func (d *vkDaemon) checkDeviceNames(model string) {
	d.t.Helper()
	res, err := http.Get(d.base + "/v1/system")
	if err != nil {
		d.t.Fatal(err)
	}
	b, err := io.ReadAll(res.Body)
	res.Body.Close()
	if err != nil {
		d.t.Fatal(err)
	}
	var raw struct {
		Probe struct {
			GPUs []struct {
				Kind  string `json:"kind"`
				Index int    `json:"index"`
			} `json:"gpus"`
		} `json:"probe"`
		Loaded struct {
			Models []struct {
				ID     string `json:"id"`
				Device string `json:"device"`
			} `json:"models"`
			VRAM map[string]json.RawMessage `json:"vram"`
		} `json:"loaded"`
	}
	if err := json.Unmarshal(b, &raw); err != nil {
		d.t.Fatalf("/v1/system: %v: %s", err, b)
	}
	var names []string
	for _, g := range raw.Probe.GPUs {
		names = append(names, fmt.Sprintf("%s:%d", g.Kind, g.Index))
	}
	onVK := false
	for _, m := range raw.Loaded.Models {
		names = append(names, m.Device)
		onVK = onVK || (m.ID == model && m.Device == vkDevice)
	}
	for dev := range raw.Loaded.VRAM {
		names = append(names, dev)
	}
	for _, n := range names {
		if !deviceVocabulary.MatchString(n) {
			d.t.Errorf("/v1/system names a device %q, not in %s", n, deviceVocabulary)
		}
	}
	if !onVK {
		d.t.Errorf("/v1/system does not show %s on %s: %s", model, vkDevice, b)
	}
	body, _ := json.Marshal(map[string]any{"model": model, "max_tokens": 1,
		"messages": []map[string]string{{"role": "user", "content": "hi"}}})
	res, err = http.Post(d.base+"/v1/chat/completions", "application/json", bytes.NewReader(body))
	if err != nil {
		d.t.Fatal(err)
	}
	_, _ = io.Copy(io.Discard, res.Body)
	res.Body.Close()
	if got := res.Header.Get("X-Modeld-Device"); got != vkDevice {
		d.t.Errorf("X-Modeld-Device %q, want %s", got, vkDevice)
	}
}

func (d *vkDaemon) unload(model string) {
	d.t.Helper()
	var out map[string]any
	post(d.t, d.base, "/v1/unload", map[string]any{"model": model, "wait": true}, 200, &out)
}

// ps is `modeld ps` against this daemon.
func (d *vkDaemon) ps() string {
	d.t.Helper()
	out, err := runCLI(d.t, map[string]string{"MODELD_HOME": d.home}, "ps", "--listen", d.addr)
	if err != nil {
		d.t.Fatalf("modeld ps: %v\n%s", err, out)
	}
	return out
}

// psRow is the line of `modeld ps` that lists id.
func psRow(t *testing.T, out, id string) string {
	t.Helper()
	for _, l := range strings.Split(out, "\n") {
		if strings.HasPrefix(l, id+" ") {
			return l
		}
	}
	t.Fatalf("modeld ps does not list %s:\n%s", id, out)
	return ""
}

// offloaded is llama.cpp's own count of the layers it put on the GPU for
// model: "offloaded N/M layers to GPU", from the runner's log.
func (d *vkDaemon) offloaded(model string) (n, of int) {
	d.t.Helper()
	m := d.waitLog(regexp.MustCompile(`offloaded (\d+)/(\d+) layers to GPU.*"model":"` + regexp.QuoteMeta(model) + `"`))
	n, _ = strconv.Atoi(m[1])
	of, _ = strconv.Atoi(m[2])
	return n, of
}

// buffer is the size llama.cpp reports for model's Vulkan0 buffer of kind
// ("model", "KV", "compute"), in bytes.
func (d *vkDaemon) buffer(model, kind string) int64 {
	d.t.Helper()
	m := d.waitLog(regexp.MustCompile(`Vulkan0 ` + kind + ` buffer size = +([0-9.]+) MiB.*"model":"` + regexp.QuoteMeta(model) + `"`))
	mib, err := strconv.ParseFloat(m[1], 64)
	if err != nil {
		d.t.Fatal(err)
	}
	return int64(mib * (1 << 20))
}

// checkAccounting: the VRAM the cache holds on the device is the sum of the
// loaded models' placement estimates, and each model's own figure is its
// estimate.
func checkAccounting(t *testing.T, sys vkSystem, when string) {
	t.Helper()
	var sum int64
	for _, m := range sys.Loaded.Models {
		if m.Device != vkDevice {
			continue
		}
		if m.VRAMBytes != m.Estimate.VRAM.total() {
			t.Errorf("%s: %s accounts %d B of VRAM, its placement estimate is %d B", when, m.ID, m.VRAMBytes, m.Estimate.VRAM.total())
		}
		sum += m.Estimate.VRAM.total()
	}
	if got := sys.Loaded.VRAM[vkDevice].UsedBytes; got != sum {
		t.Errorf("%s: the cache accounts %d B on %s, the loaded models' estimates sum to %d B", when, got, vkDevice, sum)
	}
}

// within says whether got is within frac (or slack bytes) of want.
func within(got, want int64, frac float64, slack int64) bool {
	d := math.Abs(float64(got - want))
	return d <= frac*float64(want) || d <= float64(slack)
}

func vkHome(t *testing.T) string {
	t.Helper()
	home, src := t.TempDir(), t.TempDir()
	env := map[string]string{"MODELD_HOME": home}
	chat := ggufgen.Tiny(ggufgen.SPM)
	chat.Context = 512
	big := ggufgen.Tiny(ggufgen.SPM)
	big.Layers, big.Context, big.Seed = 8, 512, 7
	for name, opts := range map[string]ggufgen.Options{vkChatModel: chat, vkBigModel: big} {
		path := filepath.Join(src, strings.ReplaceAll(name, "/", "-")+".gguf")
		if err := ggufgen.WriteFile(path, opts); err != nil {
			t.Fatal(err)
		}
		if out, err := runCLI(t, env, "import", path, "--name", name); err != nil {
			t.Fatalf("import %s: %v\n%s", name, err, out)
		}
	}
	return home
}

// requireLLVMPipe fails, naming the packages to install, when the machine has
// no software Vulkan device for modeld to find.
func requireLLVMPipe(t *testing.T, libRoot string) {
	t.Helper()
	out, err := runCLI(t, map[string]string{"MODELD_HOME": t.TempDir()}, "probe", "--json", "--allow-software-gpu", "--lib-dir", libRoot)
	if err != nil {
		t.Fatalf("modeld probe: %v\n%s", err, out)
	}
	var v vkSystem
	if err := json.Unmarshal([]byte(out), &v.Probe); err != nil {
		t.Fatalf("modeld probe --json: %v\n%s", err, out)
	}
	for _, g := range v.Probe.GPUs {
		if g.Kind == "vulkan" && g.Type == "cpu" {
			return
		}
	}
	_, reason := v.backend("vulkan")
	t.Fatalf("no software Vulkan device (%s); install Mesa's with: %s", reason, vkInstall)
}

func TestSoftwareVulkanOffload(t *testing.T) {
	gpuRoot, cpuRoot := vkLibRoot(t, true), vkLibRoot(t, false)
	requireLLVMPipe(t, gpuRoot)
	home := vkHome(t)

	// The CPU reference: the same models with no Vulkan library at all.
	var cpuChat, cpuBig greedy
	t.Run("cpu reference, Vulkan library removed", func(t *testing.T) {
		d := startVKDaemon(t, home, cpuRoot, "--allow-software-gpu")
		sys := d.system()
		if usable, reason := sys.backend("vulkan"); usable || !strings.Contains(reason, "ggml vulkan backend not installed") {
			t.Errorf("vulkan without its library: usable %v, reason %q", usable, reason)
		}
		cpuChat, cpuBig = d.chat(vkChatModel), d.chat(vkBigModel)
		sys = d.system()
		for _, id := range []string{vkChatModel, vkBigModel} {
			if m, _ := d.model(sys, id); m.Device != "cpu" || m.VRAMBytes != 0 {
				t.Errorf("%s without the Vulkan library: device %q, %d B of VRAM", id, m.Device, m.VRAMBytes)
			}
		}
		if row := psRow(t, d.ps(), vkChatModel); !strings.Contains(row, " cpu ") {
			t.Errorf("modeld ps: %q, want the CPU", row)
		}
		d.stop()
	})
	if t.Failed() {
		return
	}

	// Off by default: the software device is named, not used.
	t.Run("not allowed", func(t *testing.T) {
		d := startVKDaemon(t, home, gpuRoot)
		sys := d.system()
		if usable, reason := sys.backend("vulkan"); usable || !strings.Contains(reason, "only software devices (llvmpipe") ||
			!strings.Contains(reason, "--allow-software-gpu") {
			t.Errorf("vulkan, software GPUs not allowed: usable %v, reason %q", usable, reason)
		}
		if got := d.chat(vkChatModel); got != cpuChat {
			t.Errorf("greedy output %+v, the CPU run gave %+v", got, cpuChat)
		}
		if m, _ := d.model(d.system(), vkChatModel); m.Device != "cpu" {
			t.Errorf("%s runs on %q with software GPUs not allowed", vkChatModel, m.Device)
		}
		d.stop()
	})

	var bigFull vkEstimate
	t.Run("all layers on the device", func(t *testing.T) {
		d := startVKDaemon(t, home, gpuRoot, "--allow-software-gpu")
		sys := d.system()
		if usable, reason := sys.backend("vulkan"); !usable {
			t.Fatalf("vulkan not usable with --allow-software-gpu: %s", reason)
		}
		if got := d.chat(vkChatModel); got != cpuChat {
			t.Errorf("%s on %s: greedy output %+v, the CPU run gave %+v", vkChatModel, vkDevice, got, cpuChat)
		}
		sys = d.system()
		m, est := d.model(sys, vkChatModel)
		if m.Device != vkDevice || m.GPUShare != 1 || est.GPULayers != est.Layers || est.Layers != 3 {
			t.Errorf("%s: device %q, share %v, %d of %d layers; want all 3 on %s", vkChatModel, m.Device, m.GPUShare, est.GPULayers, est.Layers, vkDevice)
		}
		if n, of := d.offloaded(vkChatModel); n != est.Layers || of != est.Layers {
			t.Errorf("llama.cpp offloaded %d/%d layers, the plan says all %d", n, of, est.Layers)
		}
		if row := psRow(t, d.ps(), vkChatModel); !strings.Contains(row, "100% "+vkDevice) {
			t.Errorf("modeld ps: %q, want 100%% %s", row, vkDevice)
		}
		checkAccounting(t, sys, "one model loaded")
		d.checkDeviceNames(vkChatModel)

		// The estimate's parts against what llama.cpp allocated on the device.
		t.Logf("%s on %s: estimate weights %d B, KV %d B, compute %d B, overhead %d B; llama.cpp's buffers: model %d B, KV %d B, compute %d B",
			vkChatModel, vkDevice, est.VRAM.Weights, est.VRAM.KV, est.VRAM.Compute, est.VRAM.Overhead,
			d.buffer(vkChatModel, "model"), d.buffer(vkChatModel, "KV"), d.buffer(vkChatModel, "compute"))
		if got := d.buffer(vkChatModel, "model"); !within(est.VRAM.Weights, got, 0.1, 64<<10) {
			t.Errorf("weights on the device: estimated %d B, llama.cpp allocated %d B", est.VRAM.Weights, got)
		}
		if got := d.buffer(vkChatModel, "KV"); !within(est.VRAM.KV, got, 0.1, 64<<10) {
			t.Errorf("KV cache on the device: estimated %d B, llama.cpp allocated %d B", est.VRAM.KV, got)
		}
		if got := d.buffer(vkChatModel, "compute"); est.VRAM.Compute < got {
			t.Errorf("compute buffer on the device: estimated %d B, under the %d B llama.cpp allocated", est.VRAM.Compute, got)
		}

		if got := d.chat(vkBigModel); got != cpuBig {
			t.Errorf("%s on %s: greedy output %+v, the CPU run gave %+v", vkBigModel, vkDevice, got, cpuBig)
		}
		sys = d.system()
		m, bigFull = d.model(sys, vkBigModel)
		if m.Device != vkDevice || bigFull.GPULayers != bigFull.Layers {
			t.Errorf("%s: device %q, %d of %d layers", vkBigModel, m.Device, bigFull.GPULayers, bigFull.Layers)
		}
		if got := d.buffer(vkBigModel, "model"); !within(bigFull.VRAM.Weights, got, 0.1, 64<<10) {
			t.Errorf("%s weights on the device: estimated %d B, llama.cpp allocated %d B", vkBigModel, bigFull.VRAM.Weights, got)
		}
		checkAccounting(t, sys, "two models loaded")

		d.unload(vkChatModel)
		sys = d.system()
		checkAccounting(t, sys, "after unloading "+vkChatModel)
		if got := sys.Loaded.VRAM[vkDevice].UsedBytes; got != bigFull.VRAM.total() {
			t.Errorf("after unloading %s: %d B accounted, %s's estimate is %d B", vkChatModel, got, vkBigModel, bigFull.VRAM.total())
		}
		d.unload(vkBigModel)
		if got := d.system().Loaded.VRAM[vkDevice]; got.UsedBytes != 0 || got.BudgetBytes == 0 {
			t.Errorf("after unloading both: %+v, want 0 B used of a budget", got)
		}

		// The library gone after the probe: the runner finds no Vulkan
		// device, the same request runs on the CPU, and /v1/system says why.
		if err := os.Remove(filepath.Join(gpuRoot, "llama", "libggml-vulkan.so")); err != nil {
			t.Fatal(err)
		}
		if got := d.chat(vkChatModel); got != cpuChat {
			t.Errorf("after the fallback: greedy output %+v, the CPU run gave %+v", got, cpuChat)
		}
		sys = d.system()
		if m, _ := d.model(sys, vkChatModel); m.Device != "cpu" || m.VRAMBytes != 0 {
			t.Errorf("after the fallback: device %q, %d B of VRAM", m.Device, m.VRAMBytes)
		}
		if fb := sys.Fallbacks[vkChatModel]; fb.Device != vkDevice || !strings.Contains(fb.Reason, "using the CPU") {
			t.Errorf("gpu_fallbacks[%s] = %+v, want the reason it runs on the CPU", vkChatModel, fb)
		}
		checkAccounting(t, sys, "after the fallback")
		if row := psRow(t, d.ps(), vkChatModel); !strings.Contains(row, " cpu ") {
			t.Errorf("modeld ps after the fallback: %q", row)
		}
		d.stop()
		if err := os.Symlink(filepath.Join(testenv.LibDir(t), "llama-vulkan", "libggml-vulkan.so"), filepath.Join(gpuRoot, "llama", "libggml-vulkan.so")); err != nil {
			t.Fatal(err)
		}
	})
	if bigFull.Layers == 0 {
		t.Fatalf("no full-offload estimate of %s to size the budgets from", vkBigModel)
	}

	// A budget that holds the whole model but for about half its weights: a
	// split, with llama.cpp putting on the device the layers the plan says.
	t.Run("split by the VRAM budget", func(t *testing.T) {
		budget := bigFull.VRAM.total() - bigFull.VRAM.Weights/2
		d := startVKDaemon(t, home, gpuRoot, "--allow-software-gpu", "--vram-budget", strconv.FormatInt(budget, 10))
		if got := d.chat(vkBigModel); got != cpuBig {
			t.Errorf("split: greedy output %+v, the CPU run gave %+v", got, cpuBig)
		}
		sys := d.system()
		m, est := d.model(sys, vkBigModel)
		if m.Device != vkDevice || est.GPULayers <= 0 || est.GPULayers >= est.Layers || m.GPUShare <= 0 || m.GPUShare >= 1 {
			t.Fatalf("budget %d B: device %q, %d of %d layers, share %v; want a split", budget, m.Device, est.GPULayers, est.Layers, m.GPUShare)
		}
		if est.VRAM.total() > budget || m.VRAMBytes > budget {
			t.Errorf("split holds %d B (estimate %d B), over the %d B budget", m.VRAMBytes, est.VRAM.total(), budget)
		}
		t.Logf("budget %d B: %s split, %d of %d layers on %s, %d B of VRAM", budget, vkBigModel, est.GPULayers, est.Layers, vkDevice, m.VRAMBytes)
		if n, of := d.offloaded(vkBigModel); n != est.GPULayers || of != est.Layers {
			t.Errorf("llama.cpp offloaded %d/%d layers, the plan says %d of %d", n, of, est.GPULayers, est.Layers)
		}
		d.waitLog(regexp.MustCompile(`"msg":"model placed".*"model":"` + regexp.QuoteMeta(vkBigModel) + `".*"reason":"split: ` +
			strconv.Itoa(est.GPULayers) + ` of ` + strconv.Itoa(est.Layers) + ` layers fit`))
		cpuPct := 100 - int(m.GPUShare*100+0.5)
		if row := psRow(t, d.ps(), vkBigModel); !strings.Contains(row, fmt.Sprintf("%d%%/%d%% cpu/%s", cpuPct, 100-cpuPct, vkDevice)) {
			t.Errorf("modeld ps: %q, want the split", row)
		}
		checkAccounting(t, sys, "split")
		d.stop()
	})

	// A budget under the device's fixed cost: not one layer fits, the model
	// runs on the CPU, and the placement says so with the numbers.
	t.Run("refused by the VRAM budget", func(t *testing.T) {
		d := startVKDaemon(t, home, gpuRoot, "--allow-software-gpu", "--vram-budget", "64MiB")
		if got := d.chat(vkChatModel); got != cpuChat {
			t.Errorf("greedy output %+v, the CPU run gave %+v", got, cpuChat)
		}
		sys := d.system()
		if m, _ := d.model(sys, vkChatModel); m.Device != "cpu" || m.VRAMBytes != 0 {
			t.Errorf("budget 64 MiB: device %q, %d B of VRAM; want the CPU", m.Device, m.VRAMBytes)
		}
		d.waitLog(regexp.MustCompile(`"msg":"model placed".*"model":"` + regexp.QuoteMeta(vkChatModel) +
			`".*"reason":"not one layer fits on a GPU \(the whole model needs [0-9.]+ MiB of VRAM; room: ` + vkDevice + ` 64\.0 MiB free of 64\.0 MiB\); it runs on the CPU"`))
		checkAccounting(t, sys, "refused")
		d.stop()
	})

	// Chat off the GPU allowlist: the CPU, while the device stays usable.
	// The daemon's own environment names the device (as a user's might);
	// the CPU runner is shown no device all the same.
	t.Run("off the allowlist", func(t *testing.T) {
		d := startVKDaemonEnv(t, []string{"GGML_VK_VISIBLE_DEVICES=0"}, home, gpuRoot, "--allow-software-gpu", "--gpu-tasks", "embed")
		if got := d.chat(vkChatModel); got != cpuChat {
			t.Errorf("greedy output %+v, the CPU run gave %+v", got, cpuChat)
		}
		sys := d.system()
		if usable, reason := sys.backend("vulkan"); !usable {
			t.Errorf("vulkan not usable: %s", reason)
		}
		if m, _ := d.model(sys, vkChatModel); m.Device != "cpu" {
			t.Errorf("chat off the allowlist runs on %q", m.Device)
		}
		d.waitLog(regexp.MustCompile(`"msg":"model placed".*"model":"` + regexp.QuoteMeta(vkChatModel) + `".*"reason":"task chat is not on the GPU allowlist"`))
		// The runner's stderr arrives in order: its model-loader line comes
		// after whatever ggml-vulkan said about the devices it opened.
		d.waitLog(regexp.MustCompile(`llama_model_loader: loaded meta data.*"model":"` + regexp.QuoteMeta(vkChatModel) + `"`))
		if m := regexp.MustCompile(`ggml_vulkan: [0-9]+ = [^"\\]*`).FindString(d.log()); m != "" {
			t.Errorf("the CPU runner opened a Vulkan device: %q", m)
		}
		d.stop()
	})
}

// --allow-software-gpu is off by default, read from the flag or
// MODELD_ALLOW_SOFTWARE_GPU, refused when not a boolean, and handed to the
// probe.
func TestAllowSoftwareGPUSetting(t *testing.T) {
	home := t.TempDir()
	for _, tc := range []struct {
		args []string
		env  string
		want bool
	}{
		{nil, "", false},
		{[]string{"--allow-software-gpu"}, "", true},
		{[]string{"--allow-software-gpu=false"}, "true", false},
		{nil, "1", true},
	} {
		c, err := loadConfig(flags(t, tc.args...), envOf(map[string]string{"MODELD_HOME": home, "MODELD_ALLOW_SOFTWARE_GPU": tc.env}))
		if err != nil {
			t.Fatalf("%v %q: %v", tc.args, tc.env, err)
		}
		if c.AllowSoftwareGPU != tc.want || probeSources(c).AllowSoftware != tc.want {
			t.Errorf("%v, env %q: setting %v, probe %v; want %v", tc.args, tc.env, c.AllowSoftwareGPU, probeSources(c).AllowSoftware, tc.want)
		}
	}
	_, err := loadConfig(flags(t), envOf(map[string]string{"MODELD_HOME": home, "MODELD_ALLOW_SOFTWARE_GPU": "maybe"}))
	if err == nil || !strings.Contains(err.Error(), "allow-software-gpu") {
		t.Errorf("MODELD_ALLOW_SOFTWARE_GPU=maybe: err %v, want one naming the setting", err)
	}
}
