package wire

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
)

// QuantType is a quantization `modeld import --quantize` can make: the
// name users know (the one llama.cpp's quantize tool and GGUF file names
// use) and llama.cpp's llama_ftype number for it.
type QuantType struct {
	Name  string
	Ftype int32
	// Block is the number of weights per quantization block: a tensor
	// row whose length is not a multiple of it is stored in another type
	// by llama.cpp's quantizer.
	Block int
}

// quantTypes are the supported targets (llama.h, enum llama_ftype).
var quantTypes = []QuantType{
	{"Q4_0", 2, 32},
	{"Q4_K_S", 14, 256},
	{"Q4_K_M", 15, 256},
	{"Q5_0", 8, 32},
	{"Q5_K_S", 16, 256},
	{"Q5_K_M", 17, 256},
	{"Q6_K", 18, 256},
	{"Q8_0", 7, 32},
}

// QuantTypes returns the names of the supported quantizations.
func QuantTypes() []string {
	names := make([]string, len(quantTypes))
	for i, q := range quantTypes {
		names[i] = q.Name
	}
	return names
}

// ParseQuantType returns the quantization named name (case-insensitive),
// or an error that lists the supported ones.
func ParseQuantType(name string) (QuantType, error) {
	i := slices.IndexFunc(quantTypes, func(q QuantType) bool { return strings.EqualFold(q.Name, name) })
	if i < 0 {
		return QuantType{}, fmt.Errorf("unknown quantization %q (supported: %s)", name, strings.Join(QuantTypes(), ", "))
	}
	return quantTypes[i], nil
}

// The quantizer child (`modeld quantize`) reports on stdout, one line each:
// "progress DONE TOTAL" after each tensor and "done" at the end. Anything
// else there is ignored; its errors are on stderr.
const (
	QuantizeProgressPrefix = "progress "
	QuantizeDone           = "done"
)

// QuantizeProgressLine is the line reporting done of total tensors.
func QuantizeProgressLine(done, total int) string {
	return QuantizeProgressPrefix + strconv.Itoa(done) + " " + strconv.Itoa(total)
}

// ParseQuantizeProgress reads a progress line.
func ParseQuantizeProgress(line string) (done, total int, ok bool) {
	rest, ok := strings.CutPrefix(line, QuantizeProgressPrefix)
	if !ok {
		return 0, 0, false
	}
	a, b, ok := strings.Cut(rest, " ")
	if !ok {
		return 0, 0, false
	}
	d, err1 := strconv.Atoi(a)
	t, err2 := strconv.Atoi(b)
	if err1 != nil || err2 != nil || d < 0 || t <= 0 || d > t {
		return 0, 0, false
	}
	return d, t, true
}
