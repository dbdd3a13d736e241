package probe

import "testing"

func TestParseVulkanDevice(t *testing.T) {
	props := make([]byte, vkPropsSize)
	props[0], props[1], props[2] = 0x00, 0x30, 0x40 // api 1.3.0 = 1<<22 | 3<<12
	props[16] = 2                                   // discrete
	copy(props[20:], "Test GPU\x00garbage")
	mem := make([]byte, vkMemPropsSize)
	mem[260] = 2                   // two heaps
	mem[264+4] = 2                 // heap 0: 8 GiB (0x2_0000_0000)
	mem[264+8] = vkHeapDeviceLocal // heap 0 device local
	mem[280+3] = 1                 // heap 1: 16 MiB host heap, not counted
	g := parseVulkanDevice(props, mem)
	if g.Name != "Test GPU" || g.Type != "discrete" || g.TotalBytes != 8<<30 || g.Driver != "vulkan 1.3.0" {
		t.Fatalf("parsed %+v", g)
	}
}
