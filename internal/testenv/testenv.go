// Package testenv locates what modeld's tests need from the machine: the native
// runtime libraries installed by scripts/bootstrap and the llama.cpp test assets
// (chat templates, vocabularies) installed by scripts/fetch-llama-assets. A missing
// file fails the test with the command that installs it; it never skips.
package testenv

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/modeld/modeld/internal/ggufgen"
)

// LibDir returns the runtime-library root (holding llama/ and onnxruntime/):
// $MODELD_LIB_DIR, else $MODELD_HOME/lib, else $XDG_DATA_HOME/modeld/lib, else
// ~/.local/share/modeld/lib — the same rule as scripts/bootstrap. Tests hand it
// to the daemons and runners they start, so one MODELD_LIB_DIR holds for every
// process of a run: scripts/test-cpu-variants points it at a root whose llama/
// holds a single libggml-cpu-<variant>.so, which forces that CPU variant.
func LibDir(t testing.TB) string {
	t.Helper()
	dir := os.Getenv("MODELD_LIB_DIR")
	if dir == "" {
		if home := os.Getenv("MODELD_HOME"); home != "" {
			dir = filepath.Join(home, "lib")
		} else if xdg := os.Getenv("XDG_DATA_HOME"); xdg != "" {
			dir = filepath.Join(xdg, "modeld", "lib")
		} else {
			h, err := os.UserHomeDir()
			if err != nil {
				t.Fatalf("testenv: no home directory: %v", err)
			}
			dir = filepath.Join(h, ".local", "share", "modeld", "lib")
		}
	}
	return dir
}

// LlamaDir returns the llama.cpp library dir, failing the test when it is not installed.
func LlamaDir(t testing.TB) string {
	t.Helper()
	dir := filepath.Join(LibDir(t), "llama")
	requireFile(t, filepath.Join(dir, "libllama.so"))
	return dir
}

// ONNXRuntimeLib returns the path of libonnxruntime.so.1, failing the test when it is
// not installed.
func ONNXRuntimeLib(t testing.TB) string {
	t.Helper()
	p := filepath.Join(LibDir(t), "onnxruntime", "libonnxruntime.so.1")
	requireFile(t, p)
	return p
}

func requireFile(t testing.TB, path string) {
	t.Helper()
	if _, err := os.Stat(path); err != nil {
		t.Fatalf("runtime library missing: %v; install it with scripts/bootstrap (or set MODELD_LIB_DIR)", err)
	}
}

// LlamaAssets returns the dir of llama.cpp's chat templates and vocabulary-only
// GGUFs installed by scripts/fetch-llama-assets ($LibDir/llama-assets), failing the
// test when they are not installed. It holds templates/NAME.jinja (for instance
// templates/Qwen-Qwen2.5-7B-Instruct.jinja) and vocab/ggml-vocab-NAME.gguf (for
// instance vocab/ggml-vocab-qwen2.gguf); LlamaTemplate and LlamaVocab name one file.
func LlamaAssets(t testing.TB) string {
	t.Helper()
	dir := filepath.Join(LibDir(t), "llama-assets")
	if _, err := os.Stat(filepath.Join(dir, ".installed")); err != nil {
		t.Fatalf("llama.cpp test assets missing: %v; install them with scripts/fetch-llama-assets (or make test-assets)", err)
	}
	return dir
}

// LlamaTemplate returns the path of templates/NAME.jinja in LlamaAssets, failing the
// test when it is missing.
func LlamaTemplate(t testing.TB, name string) string {
	t.Helper()
	p := filepath.Join(LlamaAssets(t), "templates", name+".jinja")
	if _, err := os.Stat(p); err != nil {
		t.Fatalf("chat template %s missing from the llama.cpp test assets: %v; reinstall them with scripts/fetch-llama-assets --force", name, err)
	}
	return p
}

// LlamaVocab returns the path of vocab/ggml-vocab-NAME.gguf in LlamaAssets (NAME is
// for instance llama-bpe, qwen2, phi-3, llama-spm), failing the test when it is missing.
func LlamaVocab(t testing.TB, name string) string {
	t.Helper()
	p := filepath.Join(LlamaAssets(t), "vocab", "ggml-vocab-"+name+".gguf")
	if _, err := os.Stat(p); err != nil {
		t.Fatalf("vocabulary %s missing from the llama.cpp test assets: %v; reinstall them with scripts/fetch-llama-assets --force", name, err)
	}
	return p
}

// LlamaChatModel writes into t.TempDir() a tiny random-weight llama-architecture
// model (64 wide, 2 layers, F16) that carries the real vocabulary
// vocab/ggml-vocab-VOCAB.gguf and the real chat template templates/TEMPLATE.jinja
// of LlamaAssets, and returns its path. For instance LlamaChatModel(t, "qwen2",
// "Qwen-Qwen2.5-7B-Instruct") tokenizes and renders chats like Qwen2.5.
func LlamaChatModel(t testing.TB, vocab, template string) string {
	t.Helper()
	return LlamaModel(t, vocab, template, ggufgen.Options{Type: ggufgen.F16})
}

// AgentContext is the trained context of LlamaAgentModel: room for the
// first prompts of the agent CLIs (Claude Code's is ~11.4k tokens) and a few
// turns after them.
const AgentContext = 32768

// LlamaAgentModel is LlamaChatModel for agent clients: a trained context of
// AgentContext tokens, and answers that end by themselves after a few tens
// of tokens when sampled at temperature 1 (ggufgen.Options.EndsTurns), as an
// agent expects of a model (Claude Code takes a max_tokens stop for an
// error), in lines of about 12 tokens (LineAfter), so that a grammar's
// line-by-line text (Codex's apply_patch) ends too.
func LlamaAgentModel(t testing.TB, vocab, template string) string {
	t.Helper()
	return LlamaModel(t, vocab, template, ggufgen.Options{Type: ggufgen.F16, Context: AgentContext, EndsTurns: true, LineAfter: 12})
}

// LlamaModel writes into t.TempDir() a random-weight model of o's shape
// (ggufgen.WriteVocabModel) with the real vocabulary VOCAB and the real chat
// template TEMPLATE of LlamaAssets, and returns its path.
func LlamaModel(t testing.TB, vocab, template string, o ggufgen.Options) string {
	t.Helper()
	v, err := ggufgen.ReadVocab(LlamaVocab(t, vocab))
	if err != nil {
		t.Fatal(err)
	}
	tmpl, err := os.ReadFile(LlamaTemplate(t, template))
	if err != nil {
		t.Fatal(err)
	}
	o.Template = string(tmpl)
	path := filepath.Join(t.TempDir(), vocab+"-"+template+".gguf")
	if err := ggufgen.WriteVocabModelFile(path, v, o); err != nil {
		t.Fatal(err)
	}
	return path
}

// TrainedModel returns the path of the one trained model of the shared
// assets, models/stories260K/stories260K.gguf, under $MODELD_SHARED (the
// assets' folder) or in a shared/ folder above the test's directory. A
// checkout without it fails, saying where to put it: it is a test asset like
// the runtime libraries, not an optional extra.
func TrainedModel(t testing.TB) string {
	t.Helper()
	const rel = "models/stories260K/stories260K.gguf"
	if dir := os.Getenv("MODELD_SHARED"); dir != "" {
		p := filepath.Join(dir, rel)
		if _, err := os.Stat(p); err != nil {
			t.Fatalf("MODELD_SHARED names %s, which lacks the trained model: %v", dir, err)
		}
		return p
	}
	dir, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	for ; dir != filepath.Dir(dir); dir = filepath.Dir(dir) {
		p := filepath.Join(dir, "shared", rel)
		if _, err := os.Stat(p); err == nil {
			return p
		}
	}
	t.Fatal("the trained model shared/" + rel + " is missing: put the shared assets' folder (which holds it) beside this checkout as shared/, or set MODELD_SHARED to it (README, Testing)")
	return ""
}
