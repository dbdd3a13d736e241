package toolcall

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/modeld/modeld/internal/testenv"
)

// Snippets hold the distinctive markup of each family's template.
func TestDetectSnippets(t *testing.T) {
	for _, c := range []struct {
		tmpl string
		want Family
	}{
		{`{{- '<tool_call>\n{"name": "' }}{{ tool_call.name }}{{- '"}\n</tool_call>' }}`, Hermes},
		{`For each function call, return a json object within <tool_call></tool_call> XML tags:\n<tool_call>\n{\"name\": <function-name>}`, Hermes},
		{`{{- '<tool_call>\n<function=' + tool_call.name + '>\n' }}{{- '<parameter=' + k + '>' }}`, Generic},
		{`{{ '<tool_call>' + tc.name }}<arg_key>{{ k }}</arg_key>`, Generic},
		{`{{- "<|python_tag|>" + tool_call.function.name + ".call(" }}`, Llama3},
		{`<|start_header_id|>ipython<|end_header_id|> {"name": function name, "parameters": dictionary}`, Llama3},
		{`{{- "[TOOL_CALLS][" }}{{ tool_calls|tojson }}`, Mistral},
		{`{{- '[TOOL_CALLS]' + tool_call.function.name }}{{- '[ARGS]' + args }}`, Mistral},
		{`{{'<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>' + tool['type'] + '<｜tool▁sep｜>'}}`, DeepSeek},
		{`{{'<｜tool▁call▁begin｜>'+ tool['function']['name'] + '<｜tool▁sep｜>'}}`, DeepSeek},
		{`<|python_tag|>{{ '<function=' + tool_call.function.name + '>' + args + '</function>' }}`, FunctionaryV31},
		{`{{ '>>>all\n' + message['content'] }}{{ '>>>' + name + '\n' + args }}`, FunctionaryV32},
		{`{{- '\nAction:\n` + "```json" + `\n[\n' }} "tool_name": "{{ name }}"`, CommandR},
		{`<|START_ACTION|>[{"tool_call_id": "0", "tool_name": "x"}]<|END_ACTION|>`, CommandR},
		{`respond only with <|tool_call|> followed by a JSON list of tools used`, Granite},
		{`{{ bos_token }}{% for m in messages %}<|user|>{{ m.content }}<|end|>{% endfor %}`, Generic},
		{``, Generic},
	} {
		if got := Detect(c.tmpl); got != c.want {
			t.Errorf("Detect(%q) = %s, want %s", c.tmpl, got, c.want)
		}
	}
}

// realFamilies is the family of every chat template in the llama.cpp test
// assets. A template that is not listed fails the test, so a new asset
// gets a decision.
var realFamilies = map[string]Family{
	"Apertus-8B-Instruct":                           Generic,
	"Apriel-1.6-15b-Thinker-fixed":                  Generic,
	"Bielik-11B-v3.0-Instruct":                      Hermes,
	"ByteDance-Seed-OSS":                            Generic,
	"Cohere2MoE":                                    CommandR,
	"CohereForAI-c4ai-command-r-plus-tool_use":      CommandR,
	"CohereForAI-c4ai-command-r7b-12-2024-tool_use": CommandR,
	"GLM-4.6":                             Generic,
	"GLM-4.7-Flash":                       Generic,
	"GigaChat3-10B-A1.8B":                 Generic,
	"GigaChat3.1-10B-A1.8B":               Generic,
	"HuggingFaceTB-SmolLM3-3B":            Generic,
	"Kimi-K2-Instruct":                    Generic,
	"Kimi-K2-Thinking":                    Generic,
	"Kimi-K3":                             Generic,
	"LFM2-8B-A1B":                         Generic,
	"LFM2.5-8B-A1B":                       Generic,
	"LFM2.5-Instruct":                     Generic,
	"MiMo-VL":                             Hermes,
	"MiniMax-M1":                          Generic,
	"MiniMax-M2":                          Generic,
	"MiniMax-M3":                          Generic,
	"Mistral-Small-3.2-24B-Instruct-2506": Mistral,
	"NVIDIA-Nemotron-3-Nano-30B-A3B-BF16": Generic,
	"NVIDIA-Nemotron-Nano-v2":             Generic,
	"NousResearch-Hermes-2-Pro-Llama-3-8B-tool_use": Hermes,
	"NousResearch-Hermes-3-Llama-3.1-8B-tool_use":   Hermes,
	"Qwen-QwQ-32B":             Hermes,
	"Qwen-Qwen2.5-7B-Instruct": Hermes,
	"Qwen-Qwen3-0.6B":          Hermes,
	"Qwen3-Coder":              Generic,
	"Qwen3.5-4B":               Generic,
	"Reka-Edge":                Hermes,
	"StepFun3.5-Flash":         Generic,
	"deepseek-ai-DeepSeek-R1-Distill-Llama-8B": DeepSeek,
	"deepseek-ai-DeepSeek-R1-Distill-Qwen-32B": DeepSeek,
	"deepseek-ai-DeepSeek-V3.1":                DeepSeek,
	"deepseek-ai-DeepSeek-V3.2":                Generic,
	"deepseek-ai-DeepSeek-V4-Flash-0731":       Generic,
	"deepseek-ai-DeepSeek-V4":                  Generic,
	"fireworks-ai-llama-3-firefunction-v2":     Generic,
	"google-gemma-2-2b-it":                     Generic,
	"google-gemma-4-31B-it-interleaved":        Generic,
	"google-gemma-4-31B-it":                    Generic,
	"ibm-granite-granite-3.3-2B-Instruct":      Granite,
	"ibm-granite-granite-4.0":                  Hermes,
	"ibm-granite-granite-4.1":                  Hermes,
	"llama-cpp-deepseek-r1":                    DeepSeek,
	"llama-cpp-rwkv-world":                     Generic,
	"meetkai-functionary-medium-v3.1":          FunctionaryV31,
	"meetkai-functionary-medium-v3.2":          FunctionaryV32,
	"meta-llama-Llama-3.1-8B-Instruct":         Llama3,
	"meta-llama-Llama-3.2-3B-Instruct":         Llama3,
	"meta-llama-Llama-3.3-70B-Instruct":        Llama3,
	"microsoft-Phi-3.5-mini-instruct":          Generic,
	"mistralai-Ministral-3-14B-Reasoning-2512": Mistral,
	"mistralai-Mistral-Nemo-Instruct-2407":     Mistral,
	"moonshotai-Kimi-K2":                       Generic,
	"muse-glimmer":                             Generic,
	"openai-gpt-oss-120b":                      Generic,
	"openbmb-MiniCPM5-1B":                      Generic,
	"poolside-Laguna-S-2.1":                    Generic,
	"poolside-Laguna-XS-2.1":                   Generic,
	"poolside-Laguna-XS.2":                     Generic,
	"tencent-Hy3":                              Generic,
	"unsloth-Apriel-1.5":                       Hermes,
	"unsloth-mistral-Devstral-Small-2507":      Mistral,
	"upstage-Solar-Open-100B":                  Generic,
}

func TestDetectRealTemplates(t *testing.T) {
	files, err := filepath.Glob(filepath.Join(testenv.LlamaAssets(t), "templates", "*.jinja"))
	if err != nil {
		t.Fatal(err)
	}
	if len(files) == 0 {
		t.Fatal("no chat templates in the llama.cpp test assets; reinstall them with scripts/fetch-llama-assets --force")
	}
	seen := map[Family]bool{}
	for _, f := range files {
		name := strings.TrimSuffix(filepath.Base(f), ".jinja")
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		want, ok := realFamilies[name]
		if !ok {
			t.Errorf("template %s is not in realFamilies (Detect says %s)", name, Detect(string(b)))
			continue
		}
		if got := Detect(string(b)); got != want {
			t.Errorf("Detect(%s) = %s, want %s", name, got, want)
		}
		seen[want] = true
	}
	for _, f := range Families {
		if !seen[f] {
			t.Errorf("no real template of family %s", f)
		}
	}
}
