package cache

import (
	"sort"
	"strings"
	"time"
)

// Snapshot is what the cache holds at one moment.
type Snapshot struct {
	Models    []ModelStatus    `json:"models"`
	RAM       Usage            `json:"ram"`
	VRAM      map[string]Usage `json:"vram,omitempty"` // by GPU id, for GPUs with a budget or in use
	Loaded    int              `json:"loaded"`
	MaxLoaded int              `json:"max_loaded"` // 0 = no limit
}

// Usage is bytes held against a budget (Budget 0 = no limit).
type Usage struct {
	UsedBytes   int64 `json:"used_bytes"`
	BudgetBytes int64 `json:"budget_bytes"`
}

// ModelStatus describes one instance.
type ModelStatus struct {
	ID         string        `json:"id"`
	Task       string        `json:"task"`
	Backend    string        `json:"backend"`
	State      string        `json:"state"`             // loading, ready, unresponsive, crashed, unloading
	Problem    string        `json:"problem,omitempty"` // why it is unresponsive or crashed
	Device     string        `json:"device"`            // cpu, cuda:0, vulkan:0
	GPUShare   float64       `json:"gpu_share"`         // fraction of layers on the GPU, 0..1
	SizeBytes  int64         `json:"size_bytes"`
	VRAMBytes  int64         `json:"vram_bytes"`
	SlotsInUse int           `json:"slots_in_use"`
	Slots      int           `json:"slots"`
	Queue      int           `json:"queue"`
	LoadedAt   time.Time     `json:"loaded_at,omitzero"`
	IdleSince  time.Time     `json:"idle_since,omitzero"` // when its last request ended; zero while busy or loading
	ExpiresAt  time.Time     `json:"expires_at,omitzero"` // zero while busy or when kept loaded
	KeepAlive  time.Duration `json:"keep_alive_ns"`       // 0 = unload when idle, < 0 = keep loaded
	Estimate   any           `json:"estimate,omitempty"`  // Spec.Estimate: how RAM and VRAM were estimated
	Context    int           `json:"context,omitempty"`   // Spec.Context: tokens per sequence of a chat model
}

// Snapshot returns the loaded, loading and unloading instances, sorted by id.
func (c *Cache) Snapshot() Snapshot {
	c.mu.Lock()
	defer c.mu.Unlock()
	s := Snapshot{
		RAM:       Usage{UsedBytes: c.used.ram, BudgetBytes: c.cfg.RAM},
		Loaded:    c.used.count,
		MaxLoaded: c.cfg.MaxLoaded,
	}
	for dev, n := range c.used.vram {
		if n != 0 {
			s.addVRAM(dev, n, c.cfg.VRAM[dev])
		}
	}
	for dev, b := range c.cfg.VRAM {
		if _, ok := s.VRAM[dev]; !ok {
			s.addVRAM(dev, 0, b)
		}
	}
	for _, e := range c.entries {
		s.Models = append(s.Models, c.statusLocked(e))
	}
	for e := range c.retiring {
		s.Models = append(s.Models, c.statusLocked(e))
	}
	sort.Slice(s.Models, func(i, j int) bool {
		if s.Models[i].ID != s.Models[j].ID {
			return s.Models[i].ID < s.Models[j].ID
		}
		return s.Models[i].LoadedAt.Before(s.Models[j].LoadedAt)
	})
	return s
}

func (s *Snapshot) addVRAM(dev string, used, budget int64) {
	if s.VRAM == nil {
		s.VRAM = make(map[string]Usage)
	}
	s.VRAM[dev] = Usage{UsedBytes: used, BudgetBytes: budget}
}

func (c *Cache) statusLocked(e *entry) ModelStatus {
	st := ModelStatus{
		ID:         e.id,
		Task:       e.spec.Task,
		Backend:    e.spec.Backend,
		State:      "ready",
		Device:     e.device,
		GPUShare:   e.share,
		SizeBytes:  e.ram,
		VRAMBytes:  e.vram,
		SlotsInUse: e.inUse,
		Slots:      e.slots,
		Queue:      e.queue.Len(),
		LoadedAt:   e.loadedAt,
		KeepAlive:  e.keep,
		Estimate:   e.spec.Estimate,
		Context:    e.spec.Context,
	}
	switch {
	case e.loading:
		st.State = "loading"
	case e.retired && e.died != nil:
		st.State, st.Problem = "crashed", firstLine(e.died.Error())
	case e.retired:
		st.State = "unloading"
	case e.ailing != nil:
		st.State, st.Problem = "unresponsive", firstLine(e.ailing.Error())
	case e.inUse == 0 && e.keep > 0:
		st.ExpiresAt = e.idle.Add(e.keep)
	}
	if !e.loading && e.inUse == 0 {
		st.IdleSince = e.idle
	}
	return st
}

// VRAMUsed returns the bytes of VRAM held per GPU id by loaded, loading and
// unloading instances: what a placement adds its model to.
func (c *Cache) VRAMUsed() map[string]int64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := make(map[string]int64, len(c.used.vram))
	for dev, n := range c.used.vram {
		if n != 0 {
			out[dev] = n
		}
	}
	return out
}

// firstLine is s up to its first newline (an error's stderr tail stays out
// of the snapshot).
func firstLine(s string) string {
	line, _, _ := strings.Cut(s, "\n")
	return strings.TrimSuffix(line, "; its stderr ended with:")
}
