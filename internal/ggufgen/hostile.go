package ggufgen

import (
	"encoding/binary"
	"math"
)

// Value types the hostile files use besides those of writer.go.
const (
	typeUint8  uint32 = 0
	typeUint64 uint32 = 10
)

// Raw assembles GGUF bytes field by field and checks nothing, for tests of
// readers against malformed files.
type Raw struct{ b []byte }

// Bytes returns what has been written.
func (r *Raw) Bytes() []byte { return r.b }

// U32 appends a little-endian uint32.
func (r *Raw) U32(v uint32) *Raw { r.b = binary.LittleEndian.AppendUint32(r.b, v); return r }

// U64 appends a little-endian uint64.
func (r *Raw) U64(v uint64) *Raw { r.b = binary.LittleEndian.AppendUint64(r.b, v); return r }

// Str appends a GGUF string (u64 length, bytes).
func (r *Raw) Str(s string) *Raw { return r.U64(uint64(len(s))).Raw([]byte(s)) }

// Raw appends bytes as they are.
func (r *Raw) Raw(p []byte) *Raw { r.b = append(r.b, p...); return r }

// Header appends magic, version 3 and the two counts.
func (r *Raw) Header(tensors, kvs uint64) *Raw {
	return r.Raw([]byte("GGUF")).U32(3).U64(tensors).U64(kvs)
}

// KVString appends a string-valued metadata entry.
func (r *Raw) KVString(key, value string) *Raw { return r.Str(key).U32(typeString).Str(value) }

// KVU32 appends a uint32-valued metadata entry.
func (r *Raw) KVU32(key string, v uint32) *Raw { return r.Str(key).U32(typeUint32).U32(v) }

// TensorInfo appends one tensor info: name, dims (innermost first), ggml
// type, data offset.
func (r *Raw) TensorInfo(name string, dims []uint64, typ uint32, offset uint64) *Raw {
	r.Str(name).U32(uint32(len(dims)))
	for _, d := range dims {
		r.U64(d)
	}
	return r.U32(typ).U64(offset)
}

// Pad appends zeros up to the next multiple of align.
func (r *Raw) Pad(align int) *Raw {
	for len(r.b)%align != 0 {
		r.b = append(r.b, 0)
	}
	return r
}

// Hostile is a malformed GGUF file and a phrase the reader's error must
// contain.
type Hostile struct {
	Name string
	Want string
	Data []byte
}

// NestedArrays returns a GGUF whose one metadata value is an array of arrays
// nested depth deep (12 bytes per level): a recursive reader runs out of
// stack on it.
func NestedArrays(depth int) []byte {
	r := new(Raw).Header(0, 1).Str("general.nested").U32(typeArray)
	r.b = append(make([]byte, 0, len(r.b)+12*depth+64), r.b...)
	for range depth - 1 {
		r.U32(typeArray).U64(1)
	}
	return r.U32(typeUint8).U64(0).Bytes()
}

// ValidTiny returns a small well-formed GGUF: general.architecture = llama
// and one F32 tensor of 8 elements. The table of HostileFiles is made of
// variations of it.
func ValidTiny() []byte { return tinyWith(nil, []uint64{8}, ggmlF32, 0, 32) }

// tinyWith builds ValidTiny with extra raw metadata appended (extraKVs
// entries in extra), the tensor's dims, type and offset changed, and data
// bytes of tensor data.
func tinyWith(extra *extraKV, dims []uint64, typ uint32, offset uint64, data int) []byte {
	n := uint64(1)
	if extra != nil {
		n += extra.n
	}
	r := new(Raw).Header(1, n).KVString("general.architecture", "llama")
	if extra != nil {
		r.Raw(extra.b)
	}
	r.TensorInfo("t", dims, typ, offset).Pad(alignment)
	return r.Raw(make([]byte, data)).Bytes()
}

type extraKV struct {
	n uint64
	b []byte
}

func kvs(n uint64, f func(r *Raw)) *extraKV {
	r := new(Raw)
	f(r)
	return &extraKV{n: n, b: r.b}
}

// HostileFiles returns the malformed GGUF files every reader of model files
// must refuse with a clear error: the 10^6-deep nested arrays, huge counts
// and lengths, bad tensor infos, offsets past the end, and hyperparameters
// or vocabularies past the bounds of the header scan (a block count of
// 2^32-1, heads, experts, sizes, vocabulary arrays that disagree). Truncations of a valid
// file are left to the caller (every prefix of ValidTiny or of a Tiny model).
func HostileFiles() []Hostile {
	return append(structureHostiles(), hparamHostiles()...)
}

// structureHostiles break the GGUF format itself.
func structureHostiles() []Hostile {
	big := uint64(1) << 62
	return []Hostile{
		{"nested arrays 10^6 deep", "nested deeper", NestedArrays(1_000_000)},
		{"nested arrays 2 deep", "nested deeper", NestedArrays(2)},
		{"not GGUF", "not a GGUF file", []byte("PK\x03\x04 a zip, not a model ...........")},
		{"empty", "truncated", nil},
		{"version 1", "version 1", new(Raw).Raw([]byte("GGUF")).U32(1).U64(0).U64(0).Bytes()},
		{"big-endian", "big-endian", new(Raw).Raw([]byte("GGUF")).U32(0x03000000).U64(0).U64(0).Bytes()},
		{"version 99", "unsupported GGUF version", new(Raw).Raw([]byte("GGUF")).U32(99).U64(0).U64(0).Bytes()},
		{"tensor count 2^62", "tensor count", new(Raw).Header(big, 0).Bytes()},
		{"metadata count 2^62", "metadata key count", new(Raw).Header(0, big).Bytes()},
		{"metadata count past the end", "cannot fit", new(Raw).Header(0, 1000).KVString("general.architecture", "llama").Bytes()},
		{"key length 2^62", "key 0 is", new(Raw).Header(0, 1).U64(big).Raw([]byte("general")).Bytes()},
		{"string length 2^62", "is 4611686018427387904 bytes long", new(Raw).Header(0, 1).Str("general.architecture").U32(typeString).U64(big).Raw([]byte("llama")).Bytes()},
		{"string past the end", "truncated", new(Raw).Header(0, 1).Str("general.architecture").U32(typeString).U64(1 << 20).Raw([]byte("llama")).Bytes()},
		{"array length 2^62", "array of 4611686018427387904", new(Raw).Header(0, 1).Str("tokenizer.ggml.tokens").U32(typeArray).U32(typeString).U64(big).Bytes()},
		{"array past the end", "cannot fit", new(Raw).Header(0, 1).Str("tokenizer.ggml.scores").U32(typeArray).U32(typeFloat32).U64(1 << 20).U64(0).Bytes()},
		{"array string past the end", "truncated", new(Raw).Header(0, 1).Str("tokenizer.ggml.tokens").U32(typeArray).U32(typeString).U64(2).Str("a").U64(1 << 15).Bytes()},
		{"per-layer array too long", "must be 1 to 512", new(Raw).Header(0, 1).Str("llama.feed_forward_length").U32(typeArray).U32(typeUint8).U64(70000).Raw(make([]byte, 70000)).Bytes()},
		{"unknown value type", "unknown value type", new(Raw).Header(0, 1).Str("general.x").U32(77).U32(0).Bytes()},
		{"unknown array type", "unknown type", new(Raw).Header(0, 1).Str("general.x").U32(typeArray).U32(77).U64(1).U32(0).Bytes()},
		{"duplicate key", "appears twice", new(Raw).Header(0, 2).KVString("general.architecture", "llama").KVString("general.architecture", "gpt2").Bytes()},
		{"empty key", "is empty", new(Raw).Header(0, 1).KVString("", "llama").Bytes()},
		{"alignment 0", "not a power of two", tinyWith(kvs(1, func(r *Raw) { r.KVU32("general.alignment", 0) }), []uint64{8}, ggmlF32, 0, 32)},
		{"alignment 48", "not a power of two", tinyWith(kvs(1, func(r *Raw) { r.KVU32("general.alignment", 48) }), []uint64{8}, ggmlF32, 0, 32)},
		{"alignment a string", "must be a uint32", tinyWith(kvs(1, func(r *Raw) { r.KVString("general.alignment", "32") }), []uint64{8}, ggmlF32, 0, 32)},
		{"file type a string", "must be a number", tinyWith(kvs(1, func(r *Raw) { r.KVString("general.file_type", "F32") }), []uint64{8}, ggmlF32, 0, 32)},
		{"split tensor count 2^40", "split.tensors.count", tinyWith(kvs(1, func(r *Raw) { r.Str("split.tensors.count").U32(typeUint64).U64(1 << 40) }), []uint64{8}, ggmlF32, 0, 32)},
		{"tensor count past the end", "cannot fit", new(Raw).Header(1000, 1).KVString("general.architecture", "llama").Bytes()},
		{"tensor name too long", "tensor name is 100 bytes", new(Raw).Header(1, 1).KVString("general.architecture", "llama").TensorInfo(string(make([]byte, 100)), []uint64{8}, ggmlF32, 0).Pad(alignment).Raw(make([]byte, 32)).Bytes()},
		{"no dimensions", "0 dimensions", tinyWith(nil, nil, ggmlF32, 0, 32)},
		{"5 dimensions", "5 dimensions", tinyWith(nil, []uint64{1, 1, 1, 1, 1}, ggmlF32, 0, 32)},
		{"dimension count 2^32-1", "4294967295 dimensions", new(Raw).Header(1, 0).Str("t").U32(math.MaxUint32).U64(8).Raw(make([]byte, 64)).Bytes()},
		{"element count overflow", "overflow the element count", tinyWith(nil, []uint64{1 << 32, 1 << 32, 1 << 32}, ggmlF32, 0, 32)},
		{"byte size overflow", "byte size", tinyWith(nil, []uint64{1 << 31, 1 << 31}, ggmlF32, 0, 32)},
		{"unknown tensor type", "unknown type 1000", tinyWith(nil, []uint64{8}, 1000, 0, 32)},
		{"removed tensor type Q4_2", "no longer supports", tinyWith(nil, []uint64{32}, 4, 0, 32)},
		{"row not a multiple of the block", "not a multiple of the Q4_0 block size", tinyWith(nil, []uint64{31}, 2, 0, 32)},
		{"offset not aligned", "not a multiple of the alignment", tinyWith(nil, []uint64{8}, ggmlF32, 7, 32)},
		{"offset past the end", "past the end of the file", tinyWith(nil, []uint64{8}, ggmlF32, 1<<40, 32)},
		{"offset wraps around", "past the end of the file", tinyWith(nil, []uint64{8}, ggmlF32, math.MaxUint64-31, 32)},
		{"data cut short", "holds only 16 bytes", tinyWith(nil, []uint64{8}, ggmlF32, 0, 16)},
		{"tensor larger than the file", "past the end of the file", tinyWith(nil, []uint64{1 << 20}, ggmlF32, 0, 32)},
	}
}
