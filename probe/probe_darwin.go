package probe

// platformSources are macOS' readers. NVML and Vulkan are not there (the
// prebuilt llama.cpp for macOS has no Vulkan backend); Metal has no reader
// here: Decide takes the Metal devices from llama.cpp's own device list
// (Sources.Library), which is what a model will run on.
func platformSources() Sources {
	return Sources{
		CUDA:   func() GPUReading { return GPUReading{Unsupported: true} },
		Vulkan: func() GPUReading { return GPUReading{LibMissing: "libvulkan.1.dylib"} },
	}
}

// freeVRAM: Metal shares system memory; what is free there is not the GPU's
// to give, so the caller counts against the budget only.
func freeVRAM(GPU) (uint64, bool, error) { return 0, false, nil }
