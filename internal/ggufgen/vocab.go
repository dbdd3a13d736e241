package ggufgen

import (
	"strings"
	"unicode/utf8"
)

// Token types of tokenizer.ggml.token_type (llama.cpp's llama_token_type).
const (
	tokNormal  int32 = 1
	tokUnknown int32 = 2
	tokControl int32 = 3
	tokByte    int32 = 6
)

// Chat markers every generated vocabulary holds as control tokens.
const (
	IMStart = "<|im_start|>"
	IMEnd   = "<|im_end|>"
)

// spmSpace is SentencePiece's visible space (U+2581).
const spmSpace = "\u2581"

// words are whole-word pieces of the vocabulary; the rest of it is single
// characters, letter pairs and triples, and byte tokens.
var words = []string{
	"the", "of", "and", "to", "in", "is", "you", "that", "it", "he", "was", "for",
	"on", "are", "as", "with", "his", "they", "at", "be", "this", "have", "from",
	"or", "one", "had", "by", "word", "but", "not", "what", "all", "were", "we",
	"when", "your", "can", "said", "there", "use", "an", "each", "which", "she",
	"do", "how", "their", "if", "will", "up", "other", "about", "out", "many",
	"then", "them", "these", "so", "some", "her", "would", "make", "like", "him",
	"into", "time", "has", "look", "two", "more", "write", "go", "see", "number",
	"no", "way", "could", "people", "my", "than", "first", "water", "been", "call",
	"who", "oil", "now", "find", "long", "down", "day", "did", "get", "come",
	"made", "may", "part", "hello", "world", "model", "user", "assistant",
	"system", "answer", "question", "yes", "story", "tell", "me", "please",
	"Hello", "The", "I", "What", "How", "A", "This",
}

// extraChars are non-ASCII pieces, so multi-byte characters appear both as
// whole tokens and (for everything else) as byte sequences.
var extraChars = []string{"é", "ö", "ü", "ß", "ñ", "€", "日", "本", "語", "—"}

// vocab is a generated tokenizer vocabulary.
type vocab struct {
	model   string // tokenizer.ggml.model
	tokens  []string
	types   []int32
	scores  []float32 // SPM only
	merges  []string  // BPE only
	index   map[string]int
	bos     uint32
	eos     uint32
	unk     int64 // -1 when absent
	silence []int // ids whose output row is zero, so greedy never picks them
	end     int   // the token Options.EndsTurns raises
	newline int   // the new-line token Options.LineAfter raises; -1: none
}

func (v *vocab) add(text string, typ int32) bool {
	if _, ok := v.index[text]; ok {
		return false
	}
	v.index[text] = len(v.tokens)
	v.tokens = append(v.tokens, text)
	v.types = append(v.types, typ)
	return true
}

// fillPieces yields candidate pieces (letter pairs, then triples) in a fixed
// order, each with the prefix it extends, until yield returns false.
func fillPieces(yield func(prefix, last string) bool) {
	letters := "abcdefghijklmnopqrstuvwxyz"
	for _, a := range letters {
		for _, b := range letters {
			if !yield(string(a), string(b)) {
				return
			}
		}
	}
	for _, a := range letters {
		for _, b := range letters {
			for _, c := range letters {
				if !yield(string(a)+string(b), string(c)) {
					return
				}
			}
		}
	}
}

// spmVocab builds a SentencePiece (`llama`) vocabulary of about size tokens:
// <unk>, <s>, </s>, the ChatML markers, 256 byte tokens <0xXX> (the byte
// fallback that lets any UTF-8 text tokenize), printable ASCII, and
// ▁-prefixed word pieces whose every prefix is also a piece, so the merges
// always have a path to the whole word.
func spmVocab(size int) *vocab {
	v := &vocab{model: "llama", index: map[string]int{}, unk: 0, bos: 1, eos: 2}
	v.add("<unk>", tokUnknown)
	v.add("<s>", tokControl)
	v.add("</s>", tokControl)
	v.add(IMStart, tokControl)
	v.add(IMEnd, tokControl)
	for b := 0; b < 256; b++ {
		v.add(byteToken(byte(b)), tokByte)
	}
	for id := range v.tokens {
		v.silence = append(v.silence, id)
	}
	v.add(spmSpace, tokNormal)
	for c := byte(0x21); c < 0x7f; c++ {
		v.add(string(c), tokNormal)
		if isLetter(c) {
			v.add(spmSpace+string(c), tokNormal)
		}
	}
	for _, c := range extraChars {
		v.add(c, tokNormal)
	}
	for _, w := range words {
		addChain(v, spmSpace+w, tokNormal, nil)
	}
	fillPieces(func(prefix, last string) bool {
		if len(v.tokens) >= size {
			return false
		}
		v.add(prefix+last, tokNormal)
		if _, ok := v.index[spmSpace+prefix]; ok && len(v.tokens) < size {
			v.add(spmSpace+prefix+last, tokNormal)
		}
		return true
	})
	v.scores = make([]float32, len(v.tokens))
	for i, t := range v.types {
		if t == tokNormal {
			v.scores[i] = -float32(i)
		}
	}
	return v
}

// bpeVocab builds a byte-level BPE (`gpt2`) vocabulary of about size tokens:
// <|endoftext|>, the ChatML markers, the 256 byte characters (so any UTF-8
// text tokenizes), and word pieces built by prefix merges ("Ġ" is the space).
func bpeVocab(size int) *vocab {
	v := &vocab{model: "gpt2", index: map[string]int{}, unk: -1, bos: 0, eos: 0}
	v.add("<|endoftext|>", tokControl)
	v.add(IMStart, tokControl)
	v.add(IMEnd, tokControl)
	for id := range v.tokens {
		v.silence = append(v.silence, id)
	}
	enc := byteEncoder()
	for b := 0; b < 256; b++ {
		v.add(enc[b], tokNormal)
		if b >= 0x7f || b < 0x20 && b != '\n' {
			v.silence = append(v.silence, v.index[enc[b]])
		}
	}
	space := enc[' ']
	for c := byte('a'); c <= 'z'; c++ {
		addChain(v, space+string(c), tokNormal, &v.merges)
	}
	for _, c := range extraChars {
		addChain(v, encodeBytes(enc, c), tokNormal, &v.merges)
	}
	for _, w := range words {
		addChain(v, space+w, tokNormal, &v.merges)
		addChain(v, w, tokNormal, &v.merges)
	}
	fillPieces(func(prefix, last string) bool {
		if len(v.tokens) >= size {
			return false
		}
		addChain(v, prefix+last, tokNormal, &v.merges)
		if len(v.tokens) < size {
			addChain(v, space+prefix+last, tokNormal, &v.merges)
		}
		return true
	})
	return v
}

// addChain adds piece and every prefix of it (by characters) longer than one
// character; with merges non-nil it also records the merge "prefix last" that
// builds each of them.
func addChain(v *vocab, piece string, typ int32, merges *[]string) {
	runes := []rune(piece)
	for n := 2; n <= len(runes); n++ {
		left, right := string(runes[:n-1]), string(runes[n-1])
		if v.add(left+right, typ) && merges != nil {
			*merges = append(*merges, left+" "+right)
		}
	}
}

func byteToken(b byte) string {
	const hex = "0123456789ABCDEF"
	return "<0x" + string(hex[b>>4]) + string(hex[b&15]) + ">"
}

func isLetter(c byte) bool { return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' }

// byteEncoder is GPT-2's bytes_to_unicode table: printable Latin-1 bytes map
// to themselves, the others to U+0100 onwards, so every byte is one visible
// character.
func byteEncoder() [256]string {
	var enc [256]string
	next := rune(256)
	for b := 0; b < 256; b++ {
		printable := b >= '!' && b <= '~' || b >= 0xA1 && b <= 0xAC || b >= 0xAE && b <= 0xFF
		if printable {
			enc[b] = string(rune(b))
		} else {
			enc[b] = string(next)
			next++
		}
	}
	return enc
}

// byteDecoder inverts byteEncoder.
func byteDecoder() map[rune]byte {
	dec := make(map[rune]byte, 256)
	for b, s := range byteEncoder() {
		dec[[]rune(s)[0]] = byte(b)
	}
	return dec
}

// wholeCharacters reports whether a byte-level BPE token's bytes are valid
// UTF-8 on their own; a token with a character outside the byte alphabet is
// not.
func wholeCharacters(dec map[rune]byte, tok string) bool {
	b := make([]byte, 0, len(tok))
	for _, r := range tok {
		c, ok := dec[r]
		if !ok {
			return false
		}
		b = append(b, c)
	}
	return utf8.Valid(b)
}

func encodeBytes(enc [256]string, s string) string {
	var sb strings.Builder
	for i := 0; i < len(s); i++ {
		sb.WriteString(enc[s[i]])
	}
	return sb.String()
}
