package llama

import "strings"

// cpuOnlyEnv is the environment of a runner whose model runs on the CPU: it
// hides every CUDA and Vulkan device, so that the ggml GPU backends in the
// library dir open none (a device context costs VRAM nobody accounts for),
// whatever the daemon's own environment says.
func cpuOnlyEnv() []string { return []string{"CUDA_VISIBLE_DEVICES=", "GGML_VK_VISIBLE_DEVICES="} }

// runnerEnviron returns environ without the secrets a runner never needs: a
// runner parses model files and runs native code, so a hostile model or a
// bug there must not find the hub token or the daemon's API key in its
// environment (nor print them in a crash dump).
func runnerEnviron(environ []string) []string {
	out := make([]string, 0, len(environ))
	for _, kv := range environ {
		name, _, _ := strings.Cut(kv, "=")
		if !secretEnvName(name) {
			out = append(out, kv)
		}
	}
	return out
}

// secretEnvName reports whether an environment variable holds a credential:
// the hub tokens, modeld's API key, and any *_TOKEN, *_API_KEY, *_SECRET,
// *_SECRET_KEY, *_SECRET_ACCESS_KEY or *_PASSWORD.
func secretEnvName(name string) bool {
	upper := strings.ToUpper(name)
	switch upper {
	case "HF_TOKEN", "HUGGING_FACE_HUB_TOKEN", "HUGGINGFACE_TOKEN", "MODELD_API_KEY":
		return true
	}
	for _, suffix := range []string{"_TOKEN", "_API_KEY", "_SECRET", "_SECRET_KEY", "_SECRET_ACCESS_KEY", "_PASSWORD"} {
		if strings.HasSuffix(upper, suffix) {
			return true
		}
	}
	return false
}
