package main

import (
	"encoding/json"
	"errors"
	"flag"
	"io"

	gguf "github.com/gpustack/gguf-parser-go"
)

// runWeights prints the bytes of weights one decoded token reads: every
// tensor of the file but the token embedding, of which a step reads one
// row (unless the output projection is the embedding itself: then all of
// it is read, as the output). Memory bandwidth over this is the decode
// ceiling; the file's size overstates it by the embedding table, which is
// half of a small model with a 152k-token vocabulary.
func runWeights(args []string, w io.Writer) error {
	fs := flag.NewFlagSet("weights", flag.ContinueOnError)
	model := fs.String("model", "", "GGUF file")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *model == "" {
		return errors.New("weights: -model is required")
	}
	gf, err := gguf.ParseGGUFFile(*model, gguf.SkipLargeMetadata(), gguf.UseMMap())
	if err != nil {
		return err
	}
	var all, embd uint64
	tied := true
	for _, ti := range gf.TensorInfos {
		all += ti.Bytes()
		switch ti.Name {
		case "token_embd.weight":
			embd = ti.Bytes()
		case "output.weight":
			tied = false
		}
	}
	perToken := all
	if !tied {
		perToken -= embd
	}
	return json.NewEncoder(w).Encode(map[string]any{"tensor_bytes": all, "embedding_bytes": embd,
		"output_tied": tied, "bytes_per_token": perToken})
}
