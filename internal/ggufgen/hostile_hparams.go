package ggufgen

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"math"
)

// EditU32 returns a copy of the GGUF b with the uint32 value of metadata key
// changed to v: the 4-byte edit that turns a valid model into a hostile one
// (llama.block_count = 2^32-1). It fails when b has no such uint32 key.
func EditU32(b []byte, key string, v uint32) ([]byte, error) {
	var pat []byte
	pat = binary.LittleEndian.AppendUint64(pat, uint64(len(key)))
	pat = append(pat, key...)
	pat = binary.LittleEndian.AppendUint32(pat, typeUint32)
	i := bytes.Index(b, pat)
	if i < 0 || i+len(pat)+4 > len(b) {
		return nil, fmt.Errorf("ggufgen: no uint32 key %q", key)
	}
	out := bytes.Clone(b)
	binary.LittleEndian.PutUint32(out[i+len(pat):], v)
	return out, nil
}

// withKVs is ValidTiny with the entries f writes (n of them) added.
func withKVs(n uint64, f func(r *Raw)) []byte {
	return tinyWith(kvs(n, f), []uint64{8}, ggmlF32, 0, 32)
}

// u32Array appends a metadata entry holding a uint32 array.
func u32Array(r *Raw, key string, vs ...uint32) {
	r.Str(key).U32(typeArray).U32(typeUint32).U64(uint64(len(vs)))
	for _, v := range vs {
		r.U32(v)
	}
}

// rawVocab appends tokens (n strings "t0".."tN-1") and, when their lengths are
// not negative, token types and scores of those lengths; it returns how many
// entries it wrote.
func rawVocab(r *Raw, tokens, types, scores int) uint64 {
	kv := uint64(1)
	r.Str("tokenizer.ggml.tokens").U32(typeArray).U32(typeString).U64(uint64(tokens))
	for i := range tokens {
		r.Str(fmt.Sprintf("t%d", i))
	}
	if types >= 0 {
		kv++
		r.Str("tokenizer.ggml.token_type").U32(typeArray).U32(typeInt32).U64(uint64(types))
		for range types {
			r.U32(1)
		}
	}
	if scores >= 0 {
		kv++
		r.Str("tokenizer.ggml.scores").U32(typeArray).U32(typeFloat32).U64(uint64(scores))
		for range scores {
			r.U32(0)
		}
	}
	return kv
}

// hparamHostiles are files whose structure is sound but whose hyperparameters
// or vocabulary would make a parser or llama.cpp allocate without bound: one
// case per bound of the header scan.
func hparamHostiles() []Hostile {
	one := func(f func(r *Raw)) []byte { return withKVs(1, f) }
	two := func(f func(r *Raw)) []byte { return withKVs(2, f) }
	three := func(f func(r *Raw)) []byte { return withKVs(3, f) }
	kv := func(key string, v uint32) []byte { return one(func(r *Raw) { r.KVU32(key, v) }) }
	return []Hostile{
		{"block count 2^32-1", `"llama.block_count" is 4294967295, more than the limit of 512`, kv("llama.block_count", math.MaxUint32)},
		{"block count 513", "more than the limit of 512", kv("llama.block_count", 513)},
		{"block count 2^63 as uint64", "more than the limit of 512", one(func(r *Raw) { r.Str("llama.block_count").U32(typeUint64).U64(1 << 63) })},
		{"block count negative", "is negative", one(func(r *Raw) { r.Str("llama.block_count").U32(typeInt32).U32(math.MaxUint32) })},
		{"block count a float", "must be an integer", one(func(r *Raw) { r.Str("llama.block_count").U32(typeFloat32).U32(math.Float32bits(1e30)) })},
		{"block count a string", "must be an integer", one(func(r *Raw) { r.KVString("llama.block_count", "32") })},
		{"block count an array", "must be one integer", one(func(r *Raw) { u32Array(r, "llama.block_count", 1, 2) })},
		{"decoder block count 2^32-1", "more than the limit of 512", kv("t5.decoder_block_count", math.MaxUint32)},
		{"vision block count 2^32-1", "more than the limit of 512", kv("clip.vision.block_count", math.MaxUint32)},
		{"head count 2^20", "more than the limit of 4096", kv("llama.attention.head_count", 1<<20)},
		{"kv head count 2^32-1", "more than the limit of 4096", kv("llama.attention.head_count_kv", math.MaxUint32)},
		{"per-layer head count element 2^20", "more than the limit of 4096", one(func(r *Raw) { u32Array(r, "llama.attention.head_count", 32, 1<<20) })},
		{"per-layer head count empty", "must be 1 to 512", one(func(r *Raw) { u32Array(r, "llama.attention.head_count") })},
		{"per-layer array of 2^32 elements", "must be 1 to 512", one(func(r *Raw) {
			r.Str("llama.attention.head_count_kv").U32(typeArray).U32(typeUint32).U64(1 << 32)
		})},
		{"per-layer array of strings", "its elements must be integers", one(func(r *Raw) {
			r.Str("llama.feed_forward_length").U32(typeArray).U32(typeString).U64(1).Str("x")
		})},
		{"per-layer array of floats", "its elements must be integers", one(func(r *Raw) {
			r.Str("llama.feed_forward_length").U32(typeArray).U32(typeFloat32).U64(1).U32(0)
		})},
		{"sliding-window pattern of strings", "its elements must be integers", one(func(r *Raw) {
			r.Str("gemma4.attention.sliding_window_pattern").U32(typeArray).U32(typeString).U64(2).Str("x").Str(string(make([]byte, 1<<15)))
		})},
		{"per-layer array longer than the blocks", "has 3 per-layer values but llama.block_count is 2", two(func(r *Raw) {
			r.KVU32("llama.block_count", 2)
			u32Array(r, "llama.attention.head_count_kv", 8, 8, 8)
		})},
		{"head size 2^20", "more than the limit of 16384", kv("llama.attention.key_length", 1<<20)},
		{"embedding length 2^30", "more than the limit of 131072", kv("llama.embedding_length", 1<<30)},
		{"feed-forward length 2^31", "more than the limit of 1048576", kv("llama.feed_forward_length", 1<<31)},
		{"expert feed-forward length 2^31", "more than the limit of 1048576", kv("qwen3moe.expert_feed_forward_length", 1<<31)},
		{"context length 2^40", "more than the limit of 67108864", one(func(r *Raw) { r.Str("llama.context_length").U32(typeUint64).U64(1 << 40) })},
		{"expert count 2^31", "more than the limit of 1024", kv("llama.expert_count", 1<<31)},
		{"experts used above the experts", "expert_used_count is 9, more than llama.expert_count (8)", two(func(r *Raw) {
			r.KVU32("llama.expert_count", 8)
			r.KVU32("llama.expert_used_count", 9)
		})},
		{"experts used without experts", "more than llama.expert_count (0)", kv("llama.expert_used_count", 2)},
		{"vocab size 2^30", "more than the limit of 2097152", kv("llama.vocab_size", 1<<30)},
		{"4 Mi tokens claimed", "holds 4194304 tokens, more than the limit of 2097152", one(func(r *Raw) {
			r.Str("tokenizer.ggml.tokens").U32(typeArray).U32(typeString).U64(1 << 22)
		})},
		{"a token of a gigabyte", "is 1073741824 bytes long (limit 65536)", one(func(r *Raw) {
			r.Str("tokenizer.ggml.tokens").U32(typeArray).U32(typeString).U64(1).U64(1 << 30).Raw([]byte("x"))
		})},
		{"a merge of 100 KiB", "is 102400 bytes long (limit 65536)", two(func(r *Raw) {
			rawVocab(r, 1, -1, -1)
			r.Str("tokenizer.ggml.merges").U32(typeArray).U32(typeString).U64(1).Str(string(make([]byte, 100<<10)))
		})},
		{"tokens not strings", "must hold strings", one(func(r *Raw) { u32Array(r, "tokenizer.ggml.tokens", 1, 2) })},
		{"tokens a string", "must be an array", one(func(r *Raw) { r.KVString("tokenizer.ggml.tokens", "abc") })},
		{"token types of float32", "must hold int32 token types", two(func(r *Raw) {
			rawVocab(r, 2, -1, -1)
			r.Str("tokenizer.ggml.token_type").U32(typeArray).U32(typeFloat32).U64(2).U32(0).U32(0)
		})},
		{"scores of strings", "must hold float32 (or int32) scores", two(func(r *Raw) {
			rawVocab(r, 1, -1, -1)
			r.Str("tokenizer.ggml.scores").U32(typeArray).U32(typeString).U64(1).Str("x")
		})},
		{"fewer scores than tokens", "tokenizer.ggml.scores holds 3 entries but tokenizer.ggml.tokens holds 4", three(func(r *Raw) { rawVocab(r, 4, 4, 3) })},
		{"more token types than tokens", "tokenizer.ggml.token_type holds 5 entries but tokenizer.ggml.tokens holds 4", withKVs(2, func(r *Raw) { rawVocab(r, 4, 5, -1) })},
		{"scores without tokens", "is present but tokenizer.ggml.tokens is not", one(func(r *Raw) {
			r.Str("tokenizer.ggml.scores").U32(typeArray).U32(typeFloat32).U64(1).U32(0)
		})},
		{"merges for no tokens", "merges for 0 tokens", two(func(r *Raw) {
			rawVocab(r, 0, -1, -1)
			r.Str("tokenizer.ggml.merges").U32(typeArray).U32(typeString).U64(9)
			for range 9 {
				r.Str("a b")
			}
		})},
		{"tensor count 70000", "tensor count 70000 exceeds the limit of 65536", new(Raw).Header(70000, 0).Bytes()},
	}
}
