package gatewaytest

import (
	"bytes"
	_ "embed"
)

// ModeldConfig is the picker configuration docs/SCALING.md gives, for the
// Inference Extension's loader (less what this release lacks: file
// discovery, and dataLayer.injectDefaults, which it does not need since it
// injects no second source): the host series of modeld, the OpenAI
// parser, the running-requests scorer beside the queue, KV and prefix
// scorers, and model affinity.
//
//go:embed modeld-picker.yaml
var ModeldConfig []byte

// OllamaConfig is config for the picker of Ollama's routes: the
// passthrough parser, which routes any body (the OpenAI parser refuses
// /api/chat) but reads no model name.
func OllamaConfig(config []byte) []byte {
	return bytes.ReplaceAll(config, []byte("openai-parser"), []byte("passthrough-parser"))
}
