package probe

import (
	"encoding/binary"
	"fmt"
	"strings"
	"unsafe"

	"github.com/ebitengine/purego"
)

// Layout of the Vulkan 1.0 structures read here (64-bit):
//
//	VkInstanceCreateInfo             64 bytes; sType at 0 (1 = INSTANCE_CREATE_INFO)
//	VkPhysicalDeviceProperties      824 bytes; deviceType at 16, deviceName[256] at 20
//	VkPhysicalDeviceMemoryProperties 520 bytes; memoryHeapCount at 260,
//	                                 memoryHeaps[16]{size u64, flags u32} from 264, 16 bytes each
const (
	vkInstanceCreateInfoSize = 64
	vkPropsSize              = 1024 // >= 824
	vkMemPropsSize           = 1024 // >= 520
	vkHeapDeviceLocal        = 0x1
)

var vkDeviceTypes = map[uint32]string{0: "other", 1: "integrated", 2: "discrete", 3: "virtual", 4: "cpu"}

// readVulkan lists Vulkan physical devices through the system loader libvulkan.so.1,
// software ones (type "cpu", such as llvmpipe) too: Decide drops those unless
// they are allowed.
func readVulkan() GPUReading {
	lib, err := purego.Dlopen("libvulkan.so.1", purego.RTLD_NOW|purego.RTLD_LOCAL)
	if err != nil {
		return GPUReading{LibMissing: "libvulkan.so.1"}
	}
	defer purego.Dlclose(lib)

	var (
		createInstance  func(info, alloc, instance unsafe.Pointer) int32
		destroyInstance func(instance uintptr, alloc unsafe.Pointer)
		enumDevices     func(instance uintptr, count *uint32, devices unsafe.Pointer) int32
		getProps        func(dev uintptr, props unsafe.Pointer)
		getMemProps     func(dev uintptr, props unsafe.Pointer)
	)
	for name, fn := range map[string]any{
		"vkCreateInstance":                    &createInstance,
		"vkDestroyInstance":                   &destroyInstance,
		"vkEnumeratePhysicalDevices":          &enumDevices,
		"vkGetPhysicalDeviceProperties":       &getProps,
		"vkGetPhysicalDeviceMemoryProperties": &getMemProps,
	} {
		if _, err := purego.Dlsym(lib, name); err != nil {
			return GPUReading{Err: fmt.Errorf("libvulkan.so.1 lacks %s", name)}
		}
		purego.RegisterLibFunc(fn, lib, name)
	}

	info := make([]byte, vkInstanceCreateInfoSize)
	binary.LittleEndian.PutUint32(info[0:], 1)
	var instance uintptr
	if res := createInstance(unsafe.Pointer(&info[0]), nil, unsafe.Pointer(&instance)); res != 0 {
		return GPUReading{Err: fmt.Errorf("vkCreateInstance failed (VkResult %d)", res)}
	}
	defer destroyInstance(instance, nil)

	var n uint32
	if res := enumDevices(instance, &n, nil); res != 0 {
		return GPUReading{Err: fmt.Errorf("vkEnumeratePhysicalDevices failed (VkResult %d)", res)}
	}
	if n == 0 {
		return GPUReading{}
	}
	handles := make([]uintptr, n)
	if res := enumDevices(instance, &n, unsafe.Pointer(&handles[0])); res != 0 && res != 5 { // 5 = VK_INCOMPLETE
		return GPUReading{Err: fmt.Errorf("vkEnumeratePhysicalDevices failed (VkResult %d)", res)}
	}
	var devs []GPU
	for i, h := range handles[:n] {
		props := make([]byte, vkPropsSize)
		getProps(h, unsafe.Pointer(&props[0]))
		mem := make([]byte, vkMemPropsSize)
		getMemProps(h, unsafe.Pointer(&mem[0]))
		g := parseVulkanDevice(props, mem)
		g.NativeIndex = i
		devs = append(devs, g)
	}
	return GPUReading{Devices: devs}
}

// parseVulkanDevice decodes VkPhysicalDeviceProperties and
// VkPhysicalDeviceMemoryProperties; the device's memory is the sum of its
// device-local heaps.
func parseVulkanDevice(props, mem []byte) GPU {
	api := binary.LittleEndian.Uint32(props[0:])
	name := props[20 : 20+256]
	if i := strings.IndexByte(string(name), 0); i >= 0 {
		name = name[:i]
	}
	g := GPU{
		Name:   string(name),
		Type:   vkDeviceTypes[binary.LittleEndian.Uint32(props[16:])],
		Driver: fmt.Sprintf("vulkan %d.%d.%d", api>>22&0x7f, api>>12&0x3ff, api&0xfff),
	}
	heaps := binary.LittleEndian.Uint32(mem[260:])
	for i := uint32(0); i < heaps && i < 16; i++ {
		off := 264 + 16*i
		size := binary.LittleEndian.Uint64(mem[off:])
		flags := binary.LittleEndian.Uint32(mem[off+8:])
		if flags&vkHeapDeviceLocal != 0 {
			g.TotalBytes += size
		}
	}
	g.UnifiedMemory = g.Type == "integrated"
	return g
}
