package runner

import (
	"errors"
	"flag"
	"fmt"
	"io"

	"github.com/modeld/modeld/backends/llama/engine"
	"github.com/modeld/modeld/backends/llama/wire"
)

// QuantizeMain is `modeld quantize`, the child process that `modeld import
// --quantize` starts: it loads llama.cpp from --lib-dir and writes the
// quantized copy of --in to --out with llama.cpp's own quantizer, reporting
// each tensor on stdout (wire.QuantizeProgressLine) and "done" at the end.
// Native code reading a hostile file can abort; in this process that ends
// one quantization, never the command that started it.
func QuantizeMain(args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("quantize", flag.ContinueOnError)
	fs.SetOutput(stderr)
	libDir := fs.String("lib-dir", "", "directory of the llama.cpp libraries")
	in := fs.String("in", "", "GGUF model to read")
	out := fs.String("out", "", "GGUF file to write")
	typ := fs.String("type", "", "quantization: "+fmt.Sprint(wire.QuantTypes()))
	threads := fs.Int("threads", 0, "threads (0: llama.cpp's default)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *libDir == "" || *in == "" || *out == "" || *typ == "" {
		return errors.New("quantize: --lib-dir, --in, --out and --type are required")
	}
	q, err := wire.ParseQuantType(*typ)
	if err != nil {
		return err
	}
	if err := engine.Init(*libDir); err != nil {
		return err
	}
	err = engine.Quantize(*in, *out, q.Ftype, *threads, func(done, total int) {
		fmt.Fprintln(stdout, wire.QuantizeProgressLine(done, total))
	})
	if err != nil {
		return err
	}
	_, err = fmt.Fprintln(stdout, wire.QuantizeDone)
	return err
}
