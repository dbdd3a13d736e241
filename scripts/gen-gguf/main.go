// Command gen-gguf writes a generated llama-architecture GGUF model (see
// internal/ggufgen) to a file, for tests, the quickstart and benchmarks.
//
//	go run ./scripts/gen-gguf -out /tmp/tiny.gguf
//	go run ./scripts/gen-gguf -size bench -out /tmp/bench.gguf   # ~35 MB, F16
//	go run ./scripts/gen-gguf -vocab-file ggml-vocab-qwen2.gguf -template-file qwen2.5.jinja \
//	    -f16 -ctx 32768 -ends-turns -out /tmp/agent.gguf   # a real vocabulary; answers that end
//	go run ./scripts/gen-gguf -out /tmp/tiny.gguf -mmproj /tmp/tiny-mmproj.gguf   # and its projector (vision)
package main

import (
	"flag"
	"fmt"
	"os"

	"github.com/modeld/modeld/internal/ggufgen"
)

func main() {
	if err := run(os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "gen-gguf:", err)
		os.Exit(1)
	}
}

func run(args []string) error {
	fs := flag.NewFlagSet("gen-gguf", flag.ContinueOnError)
	out := fs.String("out", "", "output path (required)")
	size := fs.String("size", "tiny", "preset: tiny (~0.5 MB, F32) or bench (~35 MB, F16)")
	vocab := fs.String("vocab", "spm", "vocabulary: spm (SentencePiece) or bpe (byte-level BPE)")
	f16 := fs.Bool("f16", false, "store weight matrices as F16 (the bench preset always does)")
	seed := fs.Uint64("seed", 0, "weight seed")
	ctx := fs.Int("ctx", 0, "trained context length (0 = preset default)")
	noTemplate := fs.Bool("no-template", false, "omit tokenizer.chat_template")
	templateFile := fs.String("template-file", "", "file holding the chat template (default ChatML)")
	vocabFile := fs.String("vocab-file", "", "GGUF whose tokenizer the model carries (a vocabulary-only file such as llama.cpp's ggml-vocab-qwen2.gguf); -vocab and -size's vocabulary are then unused")
	endsTurns := fs.Bool("ends-turns", false, "sampled answers end after a few tens of tokens (see ggufgen.Options.EndsTurns)")
	whole := fs.Bool("whole-characters", false, "with -vocab-file (byte-level BPE): tokens that are pieces of a character get a zero output row, so greedy output is valid UTF-8 (see ggufgen.Options.WholeCharacters)")
	mmproj := fs.String("mmproj", "", "also write the model's multimodal projector here (ggufgen.TinyProjector, as wide as the model): `modeld import --mmproj` takes it")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *out == "" {
		return fmt.Errorf("-out is required")
	}
	kind, err := ggufgen.ParseVocabKind(*vocab)
	if err != nil {
		return err
	}
	var o ggufgen.Options
	switch *size {
	case "tiny":
		o = ggufgen.Tiny(kind)
	case "bench":
		o = ggufgen.Bench(kind)
	default:
		return fmt.Errorf("unknown -size %q (want tiny or bench)", *size)
	}
	if *f16 {
		o.Type = ggufgen.F16
	}
	o.Seed = *seed
	if *ctx > 0 {
		o.Context = *ctx
	}
	o.NoTemplate = *noTemplate
	o.EndsTurns = *endsTurns
	o.WholeCharacters = *whole
	if *templateFile != "" {
		b, err := os.ReadFile(*templateFile)
		if err != nil {
			return err
		}
		o.Template = string(b)
	}
	if *vocabFile != "" {
		v, err := ggufgen.ReadVocab(*vocabFile)
		if err != nil {
			return err
		}
		if err := ggufgen.WriteVocabModelFile(*out, v, o); err != nil {
			return err
		}
	} else if err := ggufgen.WriteFile(*out, o); err != nil {
		return err
	}
	st, err := os.Stat(*out)
	if err != nil {
		return err
	}
	what := kind.String()
	if *vocabFile != "" {
		what = *vocabFile
	}
	fmt.Printf("wrote %s (%d bytes, %s vocabulary)\n", *out, st.Size(), what)
	if *mmproj != "" {
		po := ggufgen.TinyProjector()
		po.TextEmbd, po.Hidden, po.Seed = o.Embd, 2*o.Embd, o.Seed
		if err := ggufgen.WriteProjectorFile(*mmproj, po); err != nil {
			return err
		}
		fmt.Printf("wrote %s (its projector: %d tokens per image)\n", *mmproj, po.ImageTokens())
	}
	return nil
}
