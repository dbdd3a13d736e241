package probe

import "testing"

func TestParseSystemProfiler(t *testing.T) {
	out := []byte(`{"SPDisplaysDataType":[{"sppci_model":"Apple M3","sppci_cores":"10","spdisplays_mtlgpufamilysupport":"spdisplays_metal3"}]}`)
	mem := func() (MemoryInfo, error) { return MemoryInfo{TotalBytes: 16 << 30, AvailableBytes: 8 << 30}, nil }
	r := parseSystemProfiler(out, mem)
	if r.Err != nil || len(r.Devices) != 1 {
		t.Fatalf("reading = %+v", r)
	}
	if g := r.Devices[0]; g.Name != "Apple M3" || g.TotalBytes != 16<<30 || !g.UnifiedMemory {
		t.Fatalf("device = %+v", g)
	}
}
