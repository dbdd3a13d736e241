package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"net/http"
	"strings"
	"sync"
	"time"
)

// probeInfo is the part of `modeld probe --json` the checks read.
type probeInfo struct {
	GPUs []struct {
		Kind       string `json:"kind"`
		Name       string `json:"name"`
		Type       string `json:"type"`
		TotalBytes uint64 `json:"total_bytes"`
	} `json:"gpus"`
	Backends []struct {
		Kind   string `json:"kind"`
		Usable bool   `json:"usable"`
		Reason string `json:"reason"`
	} `json:"backends"`
}

// checkProbe: the GPU is listed through NVML (CUDA) and through Vulkan. A
// dry run has no NVML; its Vulkan device is Mesa's software one.
func checkProbe(rep *report, out []byte, dryRun bool) {
	var p probeInfo
	if err := json.Unmarshal(out, &p); err != nil {
		rep.check("modeld probe --json", false, err.Error(), nil)
		return
	}
	reason := func(kind string) string {
		for _, b := range p.Backends {
			if b.Kind == kind {
				if b.Usable {
					return "usable"
				}
				return b.Reason
			}
		}
		return "not listed"
	}
	find := func(kind string, software bool) string {
		for _, g := range p.GPUs {
			if g.Kind == kind && (g.Type == "cpu") == software {
				return fmt.Sprintf("%s, %.1f GiB", g.Name, float64(g.TotalBytes)/(1<<30))
			}
		}
		return ""
	}
	if dryRun {
		rep.add(item{Name: "probe lists the GPU through NVML", Status: notRun, Detail: "dry run: " + reason("cuda")})
	} else {
		g := find("cuda", false)
		rep.check("probe lists the GPU through NVML", g != "", g+"; cuda backend: "+reason("cuda"), nil)
	}
	g := find("vulkan", dryRun)
	rep.check("probe lists the GPU through Vulkan", g != "", g+"; vulkan backend: "+reason("vulkan"), nil)
}

// sysInfo is the part of /v1/system the checks read.
type sysInfo struct {
	Loaded struct {
		Models []struct {
			ID        string  `json:"id"`
			Device    string  `json:"device"`
			GPUShare  float64 `json:"gpu_share"`
			VRAMBytes int64   `json:"vram_bytes"`
			Estimate  struct {
				GPULayers int `json:"gpu_layers"`
				Layers    int `json:"layers"`
			} `json:"estimate"`
		} `json:"models"`
		VRAM map[string]struct {
			UsedBytes   int64 `json:"used_bytes"`
			BudgetBytes int64 `json:"budget_bytes"`
		} `json:"vram"`
	} `json:"loaded"`
	Fallbacks map[string]struct {
		Reason string `json:"reason"`
	} `json:"gpu_fallbacks"`
}

func system(ctx context.Context, base string) (sysInfo, error) {
	var s sysInfo
	req, err := http.NewRequestWithContext(ctx, "GET", base+"/v1/system", nil)
	if err != nil {
		return s, err
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		return s, err
	}
	defer res.Body.Close()
	if res.StatusCode != 200 {
		b, _ := io.ReadAll(res.Body)
		return s, fmt.Errorf("GET /v1/system: %d %s", res.StatusCode, b)
	}
	return s, json.NewDecoder(res.Body).Decode(&s)
}

// checkOffload: the model runs with every layer on one GPU.
func checkOffload(rep *report, s sysInfo) {
	for _, m := range s.Loaded.Models {
		if m.ID != modelID {
			continue
		}
		ok := m.Device != "cpu" && m.GPUShare == 1 && m.Estimate.GPULayers == m.Estimate.Layers
		detail := fmt.Sprintf("device %s, %d of %d layers, share %.2f", m.Device, m.Estimate.GPULayers, m.Estimate.Layers, m.GPUShare)
		if fb, ok := s.Fallbacks[modelID]; ok {
			detail += "; GPU fallback: " + fb.Reason
		}
		rep.check("the model fully offloaded", ok, detail, map[string]any{"device": m.Device, "gpu_layers": m.Estimate.GPULayers, "layers": m.Estimate.Layers})
		return
	}
	rep.check("the model fully offloaded", false, "the model is not loaded", nil)
}

// vramTolerance is how far the cache's VRAM figure may be from NVML's.
const vramTolerance = 0.10

// checkVRAM: the VRAM the cache accounts is within 10% of the memory NVML
// shows used since before the GPU daemon started.
func checkVRAM(rep *report, s sysInfo, before, after int64, nvmlErr error) {
	const name = "the cache's VRAM figure against NVML's"
	var cached int64
	var dev string
	for d, u := range s.Loaded.VRAM {
		if u.UsedBytes > 0 {
			cached, dev = cached+u.UsedBytes, d
		}
	}
	if nvmlErr != nil {
		rep.add(item{Name: name, Status: notRun, Detail: fmt.Sprintf("no NVML reading (%v); the cache accounts %.0f MiB", nvmlErr, mibf(cached))})
		return
	}
	used := after - before
	ok, off := vramWithin(cached, used)
	rep.check(name, ok, fmt.Sprintf("the cache accounts %.0f MiB on %s, NVML shows %.0f MiB more in use than before the load (%+.1f%%)", mibf(cached), dev, mibf(used), off*100),
		map[string]any{"cache_bytes": cached, "nvml_bytes": used})
}

// vramWithin says whether cached is within vramTolerance of measured, and by
// how much it is off (a fraction of measured).
func vramWithin(cached, measured int64) (bool, float64) {
	if measured <= 0 {
		return false, math.Inf(1)
	}
	off := float64(cached-measured) / float64(measured)
	return math.Abs(off) <= vramTolerance, off
}

// completion is one streamed greedy completion as the client saw it.
type completion struct {
	text       string
	chunks     []string
	tokens     int
	decodeRate float64 // tokens/s after the first
}

// stream runs one greedy streamed chat completion.
func stream(ctx context.Context, base string, maxTokens int) (completion, error) {
	var c completion
	body, _ := json.Marshal(map[string]any{
		"model": modelID, "stream": true, "stream_options": map[string]any{"include_usage": true},
		"temperature": 0, "max_tokens": maxTokens,
		"messages": []map[string]string{{"role": "user", "content": prompt}},
	})
	req, err := http.NewRequestWithContext(ctx, "POST", base+"/v1/chat/completions", bytes.NewReader(body))
	if err != nil {
		return c, err
	}
	req.Header.Set("Content-Type", "application/json")
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		return c, err
	}
	defer res.Body.Close()
	if res.StatusCode != 200 {
		b, _ := io.ReadAll(res.Body)
		return c, fmt.Errorf("POST /v1/chat/completions: %d %s", res.StatusCode, b)
	}
	var first, last time.Time
	var text strings.Builder
	sc := bufio.NewScanner(res.Body)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		data, ok := strings.CutPrefix(sc.Text(), "data: ")
		if !ok || data == "[DONE]" {
			continue
		}
		var chunk struct {
			Choices []struct {
				Delta struct {
					Content string `json:"content"`
				} `json:"delta"`
			} `json:"choices"`
			Usage *struct {
				CompletionTokens int `json:"completion_tokens"`
			} `json:"usage"`
			Error *struct {
				Message string `json:"message"`
			} `json:"error"`
		}
		if err := json.Unmarshal([]byte(data), &chunk); err != nil {
			return c, fmt.Errorf("stream chunk %q: %w", data, err)
		}
		if chunk.Error != nil {
			return c, fmt.Errorf("stream error: %s", chunk.Error.Message)
		}
		if chunk.Usage != nil {
			c.tokens = chunk.Usage.CompletionTokens
		}
		for _, ch := range chunk.Choices {
			if ch.Delta.Content == "" {
				continue
			}
			now := time.Now()
			if first.IsZero() {
				first = now
			}
			last = now
			text.WriteString(ch.Delta.Content)
			c.chunks = append(c.chunks, ch.Delta.Content)
		}
	}
	if err := sc.Err(); err != nil {
		return c, err
	}
	c.text = text.String()
	if c.tokens > 1 && last.After(first) {
		c.decodeRate = float64(c.tokens-1) / last.Sub(first).Seconds()
	}
	return c, nil
}

// concurrent runs n streams at once and returns their aggregate tokens/s.
func concurrent(ctx context.Context, base string, n, maxTokens int) (float64, int, error) {
	var (
		wg     sync.WaitGroup
		mu     sync.Mutex
		tokens int
		errs   []error
	)
	start := time.Now()
	for range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c, err := stream(ctx, base, maxTokens)
			mu.Lock()
			defer mu.Unlock()
			tokens += c.tokens
			if err != nil {
				errs = append(errs, err)
			}
		}()
	}
	wg.Wait()
	if len(errs) > 0 {
		return 0, tokens, fmt.Errorf("%d of %d streams failed, the first: %w", len(errs), n, errs[0])
	}
	return float64(tokens) / time.Since(start).Seconds(), tokens, nil
}

// checkGreedy: greedy output on the GPU equals the CPU's; when it does not,
// where the two part.
func checkGreedy(rep *report, cpu, gpu completion) {
	same := commonChunks(cpu.chunks, gpu.chunks)
	ok := cpu.text == gpu.text && cpu.tokens == gpu.tokens
	detail := fmt.Sprintf("%d tokens, equal", gpu.tokens)
	if !ok {
		detail = fmt.Sprintf("the first %d of %d streamed pieces equal; CPU %q, GPU %q", same, len(cpu.chunks), clip(cpu.text, 120), clip(gpu.text, 120))
	}
	rep.check("greedy output equals the CPU run", ok, detail, map[string]any{"common_pieces": same, "cpu_tokens": cpu.tokens, "gpu_tokens": gpu.tokens})
}

func commonChunks(a, b []string) int {
	n := 0
	for n < len(a) && n < len(b) && a[n] == b[n] {
		n++
	}
	return n
}

func clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}
