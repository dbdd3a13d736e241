package engine

import (
	"errors"
	"fmt"
	"regexp"
	"strconv"
	"strings"

	yz "github.com/hybridgroup/yzma/pkg/llama"
)

// Quantize writes a copy of the GGUF model at src to dst with its weights
// quantized to the llama_ftype ftype, through llama.cpp's own quantizer
// (llama_model_quantize), on threads threads (0: llama.cpp's default).
// progress, when not nil, is called after each tensor with the number done
// and the total, from the calling goroutine. The model is not loaded for
// inference; Init must have succeeded. Like Open, a hostile file can still
// abort native code: the caller runs this in a child process.
func Quantize(src, dst string, ftype int32, threads int, progress func(done, total int)) error {
	if !initialized() {
		return ErrNotInitialized
	}
	if src == "" || dst == "" {
		return errors.New("llama: quantize needs an input and an output path")
	}
	p := yz.ModelQuantizeDefaultParams()
	p.Ftype = yz.Ftype(ftype)
	p.NThread = int32(threads)
	var last string
	native.log.setTap(func(level int32, msg string) {
		if level == logError {
			last = msg
		}
		if progress == nil {
			return
		}
		if d, t, ok := tensorProgress(msg); ok {
			progress(d, t)
		}
	})
	defer native.log.setTap(nil)
	if rc := yz.ModelQuantize(src, dst, &p); rc != 0 {
		if _, why, ok := strings.Cut(last, "failed to quantize: "); ok {
			last = why
		}
		if last != "" {
			return fmt.Errorf("llama.cpp: %s", last)
		}
		return fmt.Errorf("llama: quantize failed (status %d)", rc)
	}
	return nil
}

// tensorLine is the start of the quantizer's log line for one tensor:
// "[  12/  57]  blk.1.attn_q.weight - [...]".
var tensorLine = regexp.MustCompile(`^\[\s*(\d+)/\s*(\d+)\]\s`)

// tensorProgress reads the tensor counter of a quantizer log line.
func tensorProgress(msg string) (done, total int, ok bool) {
	m := tensorLine.FindStringSubmatch(msg)
	if m == nil {
		return 0, 0, false
	}
	d, err1 := strconv.Atoi(m[1])
	t, err2 := strconv.Atoi(m[2])
	if err1 != nil || err2 != nil || t <= 0 || d > t {
		return 0, 0, false
	}
	return d, t, true
}
