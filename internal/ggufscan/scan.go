package ggufscan

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
	"math/bits"
	"os"
	"strings"

	gguf "github.com/gpustack/gguf-parser-go"
)

// ErrInvalid is wrapped by every *Error: the file breaks the GGUF format or
// one of the Limits.
var ErrInvalid = errors.New("invalid GGUF file")

// Error says where a file breaks the format or a bound.
type Error struct {
	Offset int64  // byte offset in the file of the field at fault
	Msg    string // what is wrong there
}

func (e *Error) Error() string { return fmt.Sprintf("at byte %d: %s", e.Offset, e.Msg) }

// Unwrap makes errors.Is(err, ErrInvalid) true.
func (e *Error) Unwrap() error { return ErrInvalid }

// Header is what a successful scan found.
type Header struct {
	Version     uint32
	KVCount     uint64
	TensorCount uint64
	Alignment   uint64 // general.alignment, or 32
	DataOffset  int64  // where the aligned tensor data section starts
	DataBytes   int64  // bytes the tensors need, up to the end of the last one
}

// GGUF metadata value types (gguf.h).
const (
	typeUint8 uint32 = iota
	typeInt8
	typeUint16
	typeInt16
	typeUint32
	typeInt32
	typeFloat32
	typeBool
	typeString
	typeArray
	typeUint64
	typeInt64
	typeFloat64
	typeCount
)

var typeNames = [typeCount]string{"uint8", "int8", "uint16", "int16", "uint32", "int32", "float32", "bool", "string", "array", "uint64", "int64", "float64"}

// fixedSize is the encoded size of a scalar type, 0 for string and array.
func fixedSize(t uint32) uint64 {
	switch t {
	case typeUint8, typeInt8, typeBool:
		return 1
	case typeUint16, typeInt16:
		return 2
	case typeUint32, typeInt32, typeFloat32:
		return 4
	case typeUint64, typeInt64, typeFloat64:
		return 8
	}
	return 0
}

// minSize is the fewest bytes one value of type t takes.
func minSize(t uint32) uint64 {
	switch t {
	case typeString:
		return 8 // the length
	case typeArray:
		return 12 // element type + count
	}
	return fixedSize(t)
}

func typeName(t uint32) string {
	if t < typeCount {
		return typeNames[t]
	}
	return fmt.Sprintf("unknown type %d", t)
}

// defaultAlignment is GGUF's alignment when general.alignment is absent.
const defaultAlignment = 32

// ScanFile scans the GGUF file at path with DefaultLimits.
func ScanFile(path string) (*Header, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close() //nolint:errcheck // read-only
	st, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if !st.Mode().IsRegular() {
		return nil, fmt.Errorf("%s is not a regular file", path)
	}
	return Scan(f, st.Size(), DefaultLimits())
}

// Scan checks the GGUF held in r (size bytes) against lim. It returns an
// *Error (wrapping ErrInvalid) for a file that breaks the format or a bound,
// and r's own error when reading fails.
func Scan(r io.ReaderAt, size int64, lim Limits) (*Header, error) {
	s := &scanner{src: r, size: size, lim: lim}
	s.br = bufio.NewReaderSize(io.NewSectionReader(r, 0, size), bufSize)
	h, err := s.scan()
	if err != nil {
		return nil, err
	}
	return h, nil
}

const bufSize = 64 << 10

type scanner struct {
	src  io.ReaderAt
	size int64
	lim  Limits
	br   *bufio.Reader
	off  int64 // offset of the next unread byte
	tmp  [8]byte
	name []byte // reused buffer for keys and tensor names
}

func (s *scanner) fail(off int64, format string, args ...any) error {
	return &Error{Offset: off, Msg: fmt.Sprintf(format, args...)}
}

func (s *scanner) remaining() int64 { return s.size - s.off }

// need fails unless n more bytes are in the file.
func (s *scanner) need(n uint64, what string) error {
	if rem := s.remaining(); rem < 0 || n > uint64(rem) {
		return s.fail(s.off, "%s needs %d bytes but the file ends %d bytes later (truncated?)", what, n, max(rem, 0))
	}
	return nil
}

func (s *scanner) read(p []byte, what string) error {
	if err := s.need(uint64(len(p)), what); err != nil {
		return err
	}
	if _, err := io.ReadFull(s.br, p); err != nil {
		if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
			return s.fail(s.off, "%s: the file ends early (truncated?)", what)
		}
		return fmt.Errorf("read %s at byte %d: %w", what, s.off, err)
	}
	s.off += int64(len(p))
	return nil
}

func (s *scanner) u32(what string) (uint32, error) {
	if err := s.read(s.tmp[:4], what); err != nil {
		return 0, err
	}
	return binary.LittleEndian.Uint32(s.tmp[:4]), nil
}

func (s *scanner) u64(what string) (uint64, error) {
	if err := s.read(s.tmp[:8], what); err != nil {
		return 0, err
	}
	return binary.LittleEndian.Uint64(s.tmp[:8]), nil
}

// skip moves n bytes forward, reading through the buffer for short hops and
// repositioning for long ones.
func (s *scanner) skip(n uint64, what string) error {
	if err := s.need(n, what); err != nil {
		return err
	}
	if n <= uint64(s.br.Buffered()) || n <= bufSize {
		if _, err := s.br.Discard(int(n)); err != nil {
			if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
				return s.fail(s.off, "%s: the file ends early (truncated?)", what)
			}
			return fmt.Errorf("read %s at byte %d: %w", what, s.off, err)
		}
		s.off += int64(n)
		return nil
	}
	s.off += int64(n)
	s.br.Reset(io.NewSectionReader(s.src, s.off, s.size-s.off))
	return nil
}

// str reads a string's length, checks it against limit and the file, and
// either reads the bytes into s.name (keep) or skips them.
func (s *scanner) str(limit uint64, what string, keep bool) error {
	at := s.off
	n, err := s.u64(what)
	if err != nil {
		return err
	}
	if n > limit {
		return s.fail(at, "%s is %d bytes long (limit %d)", what, n, limit)
	}
	if err := s.need(n, what); err != nil {
		return err
	}
	if !keep {
		return s.skip(n, what)
	}
	if uint64(cap(s.name)) < n {
		s.name = make([]byte, n)
	}
	s.name = s.name[:n]
	return s.read(s.name, what)
}

func (s *scanner) scan() (*Header, error) {
	var magic [4]byte
	if err := s.read(magic[:], "magic"); err != nil {
		return nil, err
	}
	if string(magic[:]) != "GGUF" {
		return nil, s.fail(0, "not a GGUF file (it starts with %q, not \"GGUF\")", magic[:])
	}
	h := &Header{Alignment: defaultAlignment}
	var err error
	if h.Version, err = s.u32("version"); err != nil {
		return nil, err
	}
	switch {
	case h.Version == 2 || h.Version == 3:
	case h.Version == 1:
		return nil, s.fail(4, "GGUF version 1 is no longer supported (llama.cpp reads versions 2 and 3)")
	case h.Version != 0 && h.Version&0xffff == 0 && bits.ReverseBytes32(h.Version) <= 3:
		return nil, s.fail(4, "big-endian GGUF (version field %#x); only little-endian files are supported", h.Version)
	default:
		return nil, s.fail(4, "unsupported GGUF version %d (supported: 2, 3)", h.Version)
	}
	if h.TensorCount, err = s.u64("tensor count"); err != nil {
		return nil, err
	}
	if h.TensorCount > s.lim.MaxTensors {
		return nil, s.fail(8, "tensor count %d exceeds the limit of %d", h.TensorCount, s.lim.MaxTensors)
	}
	if h.KVCount, err = s.u64("metadata count"); err != nil {
		return nil, err
	}
	if h.KVCount > s.lim.MaxKV {
		return nil, s.fail(16, "metadata key count %d exceeds the limit of %d", h.KVCount, s.lim.MaxKV)
	}
	if h.KVCount > uint64(s.remaining())/13 {
		return nil, s.fail(16, "metadata key count %d cannot fit in the %d bytes that follow (truncated or corrupt)", h.KVCount, s.remaining())
	}
	if err := s.metadata(h); err != nil {
		return nil, err
	}
	if h.TensorCount > uint64(s.remaining())/32 {
		return nil, s.fail(8, "tensor count %d cannot fit in the %d bytes after the metadata (truncated or corrupt)", h.TensorCount, s.remaining())
	}
	if err := s.tensors(h); err != nil {
		return nil, err
	}
	return h, nil
}

func (s *scanner) metadata(h *Header) (err error) {
	start := s.off
	seen := make(map[string]struct{}, min(h.KVCount, 256))
	f := &facts{blocks: map[string]uint64{}, experts: map[string]uint64{}, expertsUsed: map[string]countSeen{}}
	defer func() {
		if err == nil {
			err = s.crossCheck(f)
		}
	}()
	for i := uint64(0); i < h.KVCount; i++ {
		at := s.off
		if err := s.str(s.lim.MaxKeyLen, fmt.Sprintf("metadata key %d", i), true); err != nil {
			return err
		}
		if len(s.name) == 0 {
			return s.fail(at, "metadata key %d is empty", i)
		}
		key := string(s.name)
		if _, dup := seen[key]; dup {
			return s.fail(at, "metadata key %q appears twice", clip(key))
		}
		seen[key] = struct{}{}
		vat := s.off
		var vt uint32
		vt, err = s.u32(fmt.Sprintf("type of %q", clip(key)))
		if err != nil {
			return err
		}
		if vt >= typeCount {
			return s.fail(vat, "metadata key %q has unknown value type %d", clip(key), vt)
		}
		if err := s.special(h, key, vt, vat); err != nil {
			return err
		}
		if r, ok := ruleFor(key); ok {
			if err := s.count(f, key, vt, vat, r); err != nil {
				return err
			}
		} else if err := s.keyValue(f, key, vt, vat); err != nil {
			return err
		}
		if s.off-start > s.lim.MaxMetadataBytes {
			return s.fail(at, "the metadata exceeds %d bytes by key %q", s.lim.MaxMetadataBytes, clip(key))
		}
	}
	return nil
}

// special reads and checks the keys whose values steer parsing. It leaves
// the scanner where it was: the value is read again by value.
func (s *scanner) special(h *Header, key string, vt uint32, at int64) error {
	switch key {
	case "general.alignment":
		if vt != typeUint32 {
			return s.fail(at, "general.alignment is a %s; it must be a uint32", typeName(vt))
		}
		b, err := s.br.Peek(4)
		if err != nil || s.remaining() < 4 {
			return s.fail(s.off, "general.alignment: the file ends early (truncated?)")
		}
		a := binary.LittleEndian.Uint32(b)
		if a == 0 || a&(a-1) != 0 {
			return s.fail(s.off, "general.alignment %d is not a power of two", a)
		}
		h.Alignment = uint64(a)
	case "split.tensors.count", "general.file_type":
		if fixedSize(vt) == 0 || vt == typeBool {
			return s.fail(at, "%s is a %s; it must be a number", key, typeName(vt))
		}
		if key == "split.tensors.count" {
			n := fixedSize(vt)
			b, err := s.br.Peek(int(n))
			if err != nil || s.remaining() < int64(n) {
				return s.fail(s.off, "%s: the file ends early (truncated?)", key)
			}
			var v uint64
			switch n {
			case 1:
				v = uint64(b[0])
			case 2:
				v = uint64(binary.LittleEndian.Uint16(b))
			case 4:
				v = uint64(binary.LittleEndian.Uint32(b))
			case 8:
				v = binary.LittleEndian.Uint64(b)
			}
			if v > s.lim.MaxTensors {
				return s.fail(s.off, "split.tensors.count %d exceeds the limit of %d tensors", v, s.lim.MaxTensors)
			}
		}
	}
	return nil
}

// frame is one open array while value walks nested arrays.
type frame struct {
	elem uint32
	left uint64
}

// keyValue skips the value of one metadata key, checking the vocabulary
// arrays' types and lengths and bounding the strings inside tokenizer.ggml.*
// arrays by MaxTokenLen.
func (s *scanner) keyValue(f *facts, key string, vt uint32, at int64) error {
	if vt != typeArray {
		if err := s.vocabScalar(key, vt, at); err != nil {
			return err
		}
		return s.scalar(key, vt)
	}
	strLimit := s.lim.MaxStringLen
	if strings.HasPrefix(key, "tokenizer.ggml.") {
		strLimit = min(strLimit, s.lim.MaxTokenLen)
	}
	return s.value(key, vt, strLimit, func(elem uint32, n uint64) error { return s.vocabArray(f, key, at, elem, n) })
}

// value skips one value of type vt, walking nested arrays with an explicit
// stack of at most MaxDepth frames. Strings inside arrays may be strLimit
// bytes long; top, when not nil, sees the outer array's element type and
// length before any element is read.
func (s *scanner) value(key string, vt uint32, strLimit uint64, top func(elem uint32, n uint64) error) error {
	if vt != typeArray {
		return s.scalar(key, vt)
	}
	stack := make([]frame, 0, max(0, min(s.lim.MaxDepth, 16)))
	strWhat := fmt.Sprintf("string in %q", clip(key))
	arrWhat := fmt.Sprintf("array %q", clip(key))
	open := func() error {
		at := s.off
		elem, err := s.u32(fmt.Sprintf("array type of %q", clip(key)))
		if err != nil {
			return err
		}
		if elem >= typeCount {
			return s.fail(at, "metadata key %q: array of unknown type %d", clip(key), elem)
		}
		n, err := s.u64(fmt.Sprintf("array length of %q", clip(key)))
		if err != nil {
			return err
		}
		depth := len(stack) + 1
		if depth > s.lim.MaxDepth || (elem == typeArray && depth >= s.lim.MaxDepth) {
			return s.fail(at, "metadata key %q: arrays nested deeper than %d (llama.cpp loads no arrays of arrays)", clip(key), s.lim.MaxDepth)
		}
		limit := s.lim.MaxArrayLen
		if n > limit {
			return s.fail(at, "metadata key %q: array of %d elements (limit %d)", clip(key), n, limit)
		}
		if depth == 1 && top != nil {
			if err := top(elem, n); err != nil {
				return err
			}
		}
		if hi, lo := bits.Mul64(n, minSize(elem)); hi != 0 || lo > uint64(s.remaining()) {
			return s.fail(at, "metadata key %q: array of %d %s elements cannot fit in the %d bytes left (truncated or corrupt)", clip(key), n, typeName(elem), s.remaining())
		}
		stack = append(stack, frame{elem: elem, left: n})
		return nil
	}
	if err := open(); err != nil {
		return err
	}
	for len(stack) > 0 {
		top := &stack[len(stack)-1]
		switch {
		case top.left == 0:
			stack = stack[:len(stack)-1]
		case top.elem == typeArray:
			top.left--
			if err := open(); err != nil {
				return err
			}
		case top.elem == typeString:
			top.left--
			if err := s.str(strLimit, strWhat, false); err != nil {
				return err
			}
		default:
			n := top.left * fixedSize(top.elem) // fits: checked against the file in open
			top.left = 0
			if err := s.skip(n, arrWhat); err != nil {
				return err
			}
		}
	}
	return nil
}

func (s *scanner) scalar(key string, vt uint32) error {
	if vt == typeString {
		return s.str(s.lim.MaxStringLen, fmt.Sprintf("value of %q", clip(key)), false)
	}
	return s.skip(fixedSize(vt), fmt.Sprintf("value of %q", clip(key)))
}

func (s *scanner) tensors(h *Header) error {
	type end struct {
		at     int64
		index  uint64
		name   []byte
		offset uint64
		bytes  uint64
	}
	var last end // the tensor whose data ends furthest
	var lastEnd uint64
	last.name = make([]byte, 0, min(s.lim.MaxTensorNameLen, 256))
	var dims [MaxDims]uint64
	for i := uint64(0); i < h.TensorCount; i++ {
		at := s.off
		if err := s.str(s.lim.MaxTensorNameLen, "tensor name", true); err != nil {
			return err
		}
		name := s.name
		dat := s.off
		nd, err := s.u32("tensor dimension count")
		if err != nil {
			return err
		}
		if nd == 0 || nd > MaxDims {
			return s.fail(dat, "tensor %q has %d dimensions (must be 1 to %d)", clip(string(name)), nd, MaxDims)
		}
		elements := uint64(1)
		for j := range dims {
			dims[j] = 1
			if uint32(j) >= nd {
				continue
			}
			if dims[j], err = s.u64("tensor dimension"); err != nil {
				return err
			}
			hi, lo := bits.Mul64(elements, dims[j])
			if hi != 0 || lo > math.MaxInt64 {
				return s.fail(dat, "tensor %q: its dimensions %v overflow the element count", clip(string(name)), dims[:nd])
			}
			elements = lo
		}
		tat := s.off
		typ, err := s.u32("tensor type")
		if err != nil {
			return err
		}
		tr, ok := gguf.GGMLType(typ).Trait()
		if !ok {
			return s.fail(tat, "tensor %q has unknown type %d", clip(string(name)), typ)
		}
		if tr.BlockSize == 0 || tr.TypeSize == 0 {
			return s.fail(tat, "tensor %q has type %s, which llama.cpp no longer supports", clip(string(name)), gguf.GGMLType(typ))
		}
		if dims[0]%tr.BlockSize != 0 {
			return s.fail(dat, "tensor %q: %d elements per row is not a multiple of the %s block size %d", clip(string(name)), dims[0], gguf.GGMLType(typ), tr.BlockSize)
		}
		nbytes := dims[0] / tr.BlockSize
		for _, f := range []uint64{tr.TypeSize, dims[1], dims[2], dims[3]} {
			hi, lo := bits.Mul64(nbytes, f)
			if hi != 0 || lo > math.MaxInt64 {
				return s.fail(dat, "tensor %q: the byte size of dimensions %v overflows", clip(string(name)), dims[:nd])
			}
			nbytes = lo
		}
		oat := s.off
		off, err := s.u64("tensor offset")
		if err != nil {
			return err
		}
		if off%h.Alignment != 0 {
			return s.fail(oat, "tensor %q: offset %d is not a multiple of the alignment %d", clip(string(name)), off, h.Alignment)
		}
		e, carry := bits.Add64(off, nbytes, 0)
		if carry != 0 || e > uint64(s.size) {
			return s.fail(oat, "tensor %q: its %d bytes at offset %d end past the end of the file (%d bytes)", clip(string(name)), nbytes, off, s.size)
		}
		if e > lastEnd || i == 0 {
			lastEnd = e
			last = end{at: at, index: i, name: append(last.name[:0], name...), offset: off, bytes: nbytes}
		}
	}
	pad := (h.Alignment - uint64(s.off)%h.Alignment) % h.Alignment
	h.DataOffset = s.off + int64(pad)
	h.DataBytes = int64(lastEnd)
	if lastEnd == 0 {
		return nil // no tensor bytes: the padding need not be there either
	}
	if h.DataOffset > s.size {
		return s.fail(s.off, "the file ends before the aligned start of the tensor data (truncated?)")
	}
	if held := uint64(s.size - h.DataOffset); lastEnd > held {
		return s.fail(last.at, "tensor %d %q: its %d bytes at data offset %d end at byte %d of the data section, which holds only %d bytes (truncated?)",
			last.index, clip(string(last.name)), last.bytes, last.offset, lastEnd, held)
	}
	return nil
}

// clip shortens a name from the file for an error message.
func clip(s string) string {
	const n = 64
	if len(s) <= n {
		return s
	}
	return s[:n] + "..."
}
