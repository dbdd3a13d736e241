package ggufscan

import (
	"bytes"
	"errors"
	"math"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"testing"

	gguf "github.com/gpustack/gguf-parser-go"

	"github.com/modeld/modeld/internal/ggufgen"
	"github.com/modeld/modeld/internal/testenv"
)

func scanBytes(b []byte, lim Limits) (*Header, error) {
	return Scan(bytes.NewReader(b), int64(len(b)), lim)
}

func tinyModel(t testing.TB, v ggufgen.VocabKind) []byte {
	t.Helper()
	var buf bytes.Buffer
	if err := ggufgen.Write(&buf, ggufgen.Tiny(v)); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

func TestScanAcceptsRealLayouts(t *testing.T) {
	for _, v := range []ggufgen.VocabKind{ggufgen.SPM, ggufgen.BPE} {
		b := tinyModel(t, v)
		h, err := scanBytes(b, DefaultLimits())
		if err != nil {
			t.Fatalf("%v: %v", v, err)
		}
		// The parser must agree on where the data starts.
		path := filepath.Join(t.TempDir(), "m.gguf")
		if err := os.WriteFile(path, b, 0o644); err != nil {
			t.Fatal(err)
		}
		f, err := gguf.ParseGGUFFile(path)
		if err != nil {
			t.Fatal(err)
		}
		if h.DataOffset != f.TensorDataStartOffset || h.TensorCount != uint64(len(f.TensorInfos)) || h.Version != 3 || h.Alignment != 32 {
			t.Fatalf("%v: header %+v; parser: data at %d, %d tensors", v, h, f.TensorDataStartOffset, len(f.TensorInfos))
		}
		if h.DataOffset+h.DataBytes > int64(len(b)) || h.DataBytes == 0 {
			t.Fatalf("%v: data %d+%d in a %d-byte file", v, h.DataOffset, h.DataBytes, len(b))
		}
	}
	if _, err := scanBytes(ggufgen.ValidTiny(), DefaultLimits()); err != nil {
		t.Fatalf("ValidTiny: %v", err)
	}
}

func TestScanRefusesHostileFiles(t *testing.T) {
	for _, h := range ggufgen.HostileFiles() {
		t.Run(h.Name, func(t *testing.T) {
			_, err := scanBytes(h.Data, DefaultLimits())
			if err == nil {
				t.Fatal("accepted")
			}
			var se *Error
			if !errors.As(err, &se) || !errors.Is(err, ErrInvalid) {
				t.Fatalf("error %T %v is not an *Error wrapping ErrInvalid", err, err)
			}
			if !strings.Contains(err.Error(), h.Want) {
				t.Fatalf("error %q does not say %q", err, h.Want)
			}
			if se.Offset < 0 || se.Offset > int64(len(h.Data)) {
				t.Fatalf("offset %d outside the %d-byte file", se.Offset, len(h.Data))
			}
			if len(err.Error()) > 400 {
				t.Fatalf("error of %d bytes", len(err.Error()))
			}
		})
	}
}

// Every prefix of a valid file is refused with an *Error, never a panic.
func TestScanRefusesEveryTruncation(t *testing.T) {
	for _, b := range [][]byte{ggufgen.ValidTiny(), tinyModel(t, ggufgen.BPE)} {
		h, err := scanBytes(b, DefaultLimits())
		if err != nil {
			t.Fatal(err)
		}
		end := int(h.DataOffset + h.DataBytes)
		// Every offset of the header's first 2 KiB, then 400 cuts through the
		// rest of the metadata, the tensor infos and the data.
		var cuts []int
		for n := 0; n < min(end, 2048); n++ {
			cuts = append(cuts, n)
		}
		for n := 2048; n < end; n += max(1, (end-2048)/400) {
			cuts = append(cuts, n)
		}
		for _, n := range cuts {
			_, err := scanBytes(b[:n], DefaultLimits())
			var se *Error
			if !errors.As(err, &se) {
				t.Fatalf("prefix of %d bytes (of %d): %v", n, len(b), err)
			}
		}
	}
}

// Nesting is walked with an explicit stack: a deeper limit accepts exactly
// that depth, and a million levels cost no recursion.
func TestScanNestingDepth(t *testing.T) {
	lim := DefaultLimits()
	lim.MaxDepth = 4
	if _, err := scanBytes(ggufgen.NestedArrays(4), lim); err != nil {
		t.Fatalf("depth 4 with MaxDepth 4: %v", err)
	}
	_, err := scanBytes(ggufgen.NestedArrays(5), lim)
	if err == nil || !strings.Contains(err.Error(), "nested deeper than 4") {
		t.Fatalf("depth 5 with MaxDepth 4: %v", err)
	}
	lim.MaxDepth = 2_000_000
	if _, err := scanBytes(ggufgen.NestedArrays(1_000_000), lim); err != nil {
		t.Fatalf("a million levels with a limit above them: %v", err)
	}
	if _, err := scanBytes(ggufgen.NestedArrays(1), DefaultLimits()); err != nil {
		t.Fatalf("a plain array: %v", err)
	}
}

func TestScanFile(t *testing.T) {
	dir := t.TempDir()
	good := filepath.Join(dir, "good.gguf")
	if err := os.WriteFile(good, ggufgen.ValidTiny(), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := ScanFile(good); err != nil {
		t.Fatal(err)
	}
	if _, err := ScanFile(dir); err == nil || !strings.Contains(err.Error(), "not a regular file") {
		t.Fatalf("directory: %v", err)
	}
	if _, err := ScanFile(filepath.Join(dir, "missing.gguf")); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("missing file: %v", err)
	}
}

// A skip longer than the read buffer repositions instead of reading through.
func TestScanSkipsLargeValues(t *testing.T) {
	r := new(ggufgen.Raw).Header(1, 2).KVString("general.architecture", "llama").
		Str("general.weights").U32(9).U32(6).U64(1<<18).Raw(make([]byte, 4<<18)).
		TensorInfo("t", []uint64{8}, 0, 0).Pad(32).Raw(make([]byte, 32))
	b := r.Bytes()
	h, err := scanBytes(b, DefaultLimits())
	if err != nil {
		t.Fatal(err)
	}
	if h.DataOffset+32 != int64(len(b)) {
		t.Fatalf("data at %d in a %d-byte file", h.DataOffset, len(b))
	}
}

// realSeeds are the fuzz seeds made of the llama.cpp test assets: the
// metadata of the 19 real vocabularies and a tiny file per real template.
// A missing asset dir fails the test.
func realSeeds(tb testing.TB) [][]byte {
	tb.Helper()
	seeds, err := ggufgen.Seeds(testenv.LlamaAssets(tb))
	if err != nil {
		tb.Fatal(err)
	}
	if len(seeds) < 19+68 {
		tb.Fatalf("%d seeds from the assets, want at least 87", len(seeds))
	}
	return seeds
}

// The seeds keep the real files' metadata and pass the scan.
func TestScanAcceptsRealSeeds(t *testing.T) {
	for i, b := range realSeeds(t) {
		if _, err := scanBytes(b, DefaultLimits()); err != nil {
			t.Errorf("seed %d: %v", i, err)
		}
	}
}

func FuzzScan(f *testing.F) {
	for _, b := range realSeeds(f) {
		f.Add(b)
	}
	f.Add(ggufgen.ValidTiny())
	f.Add(tinyModel(f, ggufgen.SPM)[:4096])
	f.Add(ggufgen.NestedArrays(3))
	for _, h := range ggufgen.HostileFiles() {
		if len(h.Data) < 1<<16 {
			f.Add(h.Data)
		}
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		h, err := scanBytes(b, DefaultLimits())
		if err != nil {
			if !errors.Is(err, ErrInvalid) {
				t.Fatalf("error %v does not wrap ErrInvalid", err)
			}
			return
		}
		if h.DataOffset < 0 || h.DataOffset%int64(h.Alignment) != 0 || (h.DataBytes > 0 && h.DataOffset+h.DataBytes > int64(len(b))) {
			t.Fatalf("accepted with data %d+%d (alignment %d) in a %d-byte file", h.DataOffset, h.DataBytes, h.Alignment, len(b))
		}
	})
}

// BenchmarkScanVocab scans the header of a file with a 262,144-token
// vocabulary (tokens, scores, types: the size of the largest real ones).
func BenchmarkScanVocab(b *testing.B) {
	const n = 1 << 18
	r := new(ggufgen.Raw).Header(1, 4).KVString("general.architecture", "llama")
	r.Str("tokenizer.ggml.tokens").U32(9).U32(8).U64(n)
	for i := range n {
		r.Str("tok" + strconv.Itoa(i))
	}
	r.Str("tokenizer.ggml.scores").U32(9).U32(6).U64(n).Raw(make([]byte, 4*n))
	r.Str("tokenizer.ggml.token_type").U32(9).U32(5).U64(n).Raw(make([]byte, 4*n))
	r.TensorInfo("t", []uint64{8}, 0, 0).Pad(32).Raw(make([]byte, 32))
	data := r.Bytes()
	b.SetBytes(int64(len(data)))
	for b.Loop() {
		if _, err := scanBytes(data, DefaultLimits()); err != nil {
			b.Fatal(err)
		}
	}
}

// Every real vocabulary of the llama.cpp release modeld runs passes the
// scan: the bounds sit above every real model. A missing asset dir fails.
func TestScanAcceptsRealVocabularies(t *testing.T) {
	paths, err := filepath.Glob(filepath.Join(testenv.LlamaAssets(t), "vocab", "ggml-vocab-*.gguf"))
	if err != nil || len(paths) < 19 {
		t.Fatalf("%d vocabularies (%v), want 19", len(paths), err)
	}
	for _, p := range paths {
		if _, err := ScanFile(p); err != nil {
			t.Errorf("%s: %v", filepath.Base(p), err)
		}
	}
}

// The 4-byte edit of a valid model (llama.block_count = 2^32-1) is refused,
// and the scan that refuses it allocates a bounded amount, nothing in
// proportion to the count it read.
func TestScanRefusesBlockCountEditWithinBoundedMemory(t *testing.T) {
	good := tinyModel(t, ggufgen.BPE)
	if _, err := scanBytes(good, DefaultLimits()); err != nil {
		t.Fatal(err)
	}
	for _, v := range []uint32{math.MaxUint32, 1 << 31, 1 << 20, 513} {
		bad, err := ggufgen.EditU32(good, "llama.block_count", v)
		if err != nil {
			t.Fatal(err)
		}
		if len(bad) != len(good) {
			t.Fatal("the edit changed the size")
		}
		_, err = scanBytes(bad, DefaultLimits())
		if !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), "llama.block_count") || !strings.Contains(err.Error(), "limit of 512") {
			t.Fatalf("block_count %d: %v", v, err)
		}
	}
	bad, _ := ggufgen.EditU32(good, "llama.block_count", math.MaxUint32)
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	const runs = 20
	for range runs {
		if _, err := scanBytes(bad, DefaultLimits()); err == nil {
			t.Fatal("accepted")
		}
	}
	runtime.ReadMemStats(&after)
	per := (after.TotalAlloc - before.TotalAlloc) / runs
	if per > 1<<20 {
		t.Fatalf("one scan of the hostile header allocated %d bytes", per)
	}
	t.Logf("one scan of the %d-byte hostile model allocates %d bytes", len(bad), per)
}
