package placement

import "github.com/modeld/modeld/probe"

// Shares of the machine's memory that the automatic budgets give to models.
const (
	RAMShare  = 0.8 // of total RAM
	VRAMShare = 0.9 // of each GPU's total memory
)

// Budgets returns the memory budgets of the cache: ram bytes of RAM (the
// setting, or RAMShare of the total when it is 0), and for every GPU of a
// usable backend whose size is known, vram bytes (the setting, the same for
// each GPU, or VRAMShare of its total when it is 0). vram is nil without
// such a GPU. A GPU on unified memory (UnifiedMemory) shares the RAM
// budget: its own is no larger than that, and what a model holds on it
// counts against the RAM budget too (Plan.RAM).
func Budgets(info probe.Info, ram, vram int64) (ramBudget int64, vramBudgets map[string]int64) {
	ramBudget = ram
	if ramBudget == 0 {
		ramBudget = int64(float64(info.Memory.TotalBytes) * RAMShare)
	}
	for _, g := range info.GPUs {
		if !info.Backend(g.Kind).Usable || g.TotalBytes == 0 {
			continue
		}
		if vramBudgets == nil {
			vramBudgets = map[string]int64{}
		}
		b := vram
		if b == 0 {
			b = int64(float64(g.TotalBytes) * VRAMShare)
		}
		if UnifiedMemory(info.OS, g) {
			b = min(b, ramBudget)
		}
		vramBudgets[g.ID()] = b
	}
	return ramBudget, vramBudgets
}
