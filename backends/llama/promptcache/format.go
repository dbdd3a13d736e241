package promptcache

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
)

// The file format, all integers little-endian:
//
//	magic     8 bytes "MODELDKV"
//	version   uint32 (formatVersion)
//	model     32 bytes, the model file's sha256
//	configLen uint32, then configLen bytes of KV configuration text
//	nTokens   uint32, then nTokens int32 tokens (the prefix)
//	stateLen  uint64, then stateLen bytes of llama.cpp sequence state
//	checksum  uint32, CRC-32C (Castagnoli) of every byte before it
//
// The checksum finds what goes wrong with a file by accident (a write cut
// short, a flipped bit: CRC-32C detects every error of up to 32 bits in a
// row); it is no defence against someone who can write the file, who could
// as well write a matching unkeyed SHA-256: the directory being private to
// the daemon's user is that defence. Version 1 ended in a SHA-256, which on
// this project's 2-core machine took half a second per 149 MB entry.
const (
	magic         = "MODELDKV"
	formatVersion = 2
	// MaxTokens bounds an entry's prefix; MaxConfig its configuration text.
	MaxTokens = 1 << 22
	MaxConfig = 4096
	sumLen    = 4
	// readChunk is how much of the state is read at once, straight into
	// its buffer, and checksummed while still in the CPU's caches.
	readChunk = 4 << 20
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// ErrFormat is wrapped by every error about a file's content.
var ErrFormat = errors.New("promptcache: bad cache file")

// Key is what makes a saved state usable: the model and the KV
// configuration it was computed with.
type Key struct {
	Model  [32]byte // sha256 of the model file
	Config string   // the engine's KV configuration text
}

// Header is a file's description of its entry.
type Header struct {
	Key      Key
	Tokens   []int32
	StateLen int64
	// StateOff is where the state begins in the file.
	StateOff int64
}

// fileSize is the length of a file holding h's entry.
func (h Header) fileSize() int64 { return h.StateOff + h.StateLen + sumLen }

func headerLen(configLen, nTokens int) int64 {
	return int64(len(magic)) + 4 + 32 + 4 + int64(configLen) + 4 + 4*int64(nTokens) + 8
}

// encodeHeader is the file's bytes before the state.
func encodeHeader(k Key, tokens []int32, stateLen int64) []byte {
	b := make([]byte, 0, headerLen(len(k.Config), len(tokens)))
	b = append(b, magic...)
	b = binary.LittleEndian.AppendUint32(b, formatVersion)
	b = append(b, k.Model[:]...)
	b = binary.LittleEndian.AppendUint32(b, uint32(len(k.Config)))
	b = append(b, k.Config...)
	b = binary.LittleEndian.AppendUint32(b, uint32(len(tokens)))
	for _, t := range tokens {
		b = binary.LittleEndian.AppendUint32(b, uint32(t))
	}
	return binary.LittleEndian.AppendUint64(b, uint64(stateLen))
}

// ReadHeader reads the header of a cache file of size bytes from r (the
// file's start) and checks it against size: magic, version, the bounds of
// every length, and that the lengths add up to size exactly. Nothing is
// allocated beyond what size allows. The checksum is not checked (that
// needs the whole file: see readEntry).
func ReadHeader(r io.Reader, size int64) (Header, error) {
	var h Header
	bad := func(format string, args ...any) (Header, error) {
		return Header{}, fmt.Errorf("%w: %s", ErrFormat, fmt.Sprintf(format, args...))
	}
	fixed := headerLen(0, 0)
	if size < fixed+sumLen {
		return bad("%d bytes is shorter than a header", size)
	}
	var start [8 + 4 + 32 + 4]byte
	if _, err := io.ReadFull(r, start[:]); err != nil {
		return bad("header: %v", err)
	}
	if string(start[:8]) != magic {
		return bad("no magic")
	}
	if v := binary.LittleEndian.Uint32(start[8:]); v != formatVersion {
		return bad("version %d, want %d", v, formatVersion)
	}
	copy(h.Key.Model[:], start[12:44])
	configLen := int64(binary.LittleEndian.Uint32(start[44:]))
	if configLen > MaxConfig || fixed+configLen+sumLen > size {
		return bad("configuration of %d bytes does not fit", configLen)
	}
	cfg := make([]byte, configLen)
	if _, err := io.ReadFull(r, cfg); err != nil {
		return bad("configuration: %v", err)
	}
	h.Key.Config = string(cfg)
	var n4 [4]byte
	if _, err := io.ReadFull(r, n4[:]); err != nil {
		return bad("token count: %v", err)
	}
	nTokens := int64(binary.LittleEndian.Uint32(n4[:]))
	if nTokens == 0 || nTokens > MaxTokens || fixed+configLen+4*nTokens+sumLen > size {
		return bad("%d tokens do not fit", nTokens)
	}
	raw := make([]byte, 4*nTokens)
	if _, err := io.ReadFull(r, raw); err != nil {
		return bad("tokens: %v", err)
	}
	h.Tokens = make([]int32, nTokens)
	for i := range h.Tokens {
		h.Tokens[i] = int32(binary.LittleEndian.Uint32(raw[4*i:]))
	}
	var n8 [8]byte
	if _, err := io.ReadFull(r, n8[:]); err != nil {
		return bad("state length: %v", err)
	}
	h.StateOff = headerLen(int(configLen), int(nTokens))
	stateLen := binary.LittleEndian.Uint64(n8[:])
	if stateLen == 0 || stateLen > uint64(size) || h.StateOff+int64(stateLen)+sumLen != size {
		return bad("state of %d bytes does not match the file's %d", stateLen, size)
	}
	h.StateLen = int64(stateLen)
	return h, nil
}

// readEntry reads a whole cache file of size bytes: the header (checked as
// ReadHeader does), the state and the checksum over both. want, when not
// nil, is the key the file must carry.
func readEntry(r io.Reader, size int64, want *Key) (Header, []byte, error) {
	sum := crc32.New(castagnoli)
	tee := io.TeeReader(r, sum)
	h, err := ReadHeader(tee, size)
	if err != nil {
		return Header{}, nil, err
	}
	if want != nil && h.Key.Model != want.Model {
		return Header{}, nil, fmt.Errorf("%w: saved for another model", ErrFormat)
	}
	if want != nil && h.Key.Config != want.Config {
		return Header{}, nil, fmt.Errorf("%w: saved with another KV configuration (%q, want %q)", ErrFormat, h.Key.Config, want.Config)
	}
	state := make([]byte, h.StateLen)
	for off := 0; off < len(state); off += readChunk {
		part := state[off:min(off+readChunk, len(state))]
		if _, err := io.ReadFull(r, part); err != nil {
			return Header{}, nil, fmt.Errorf("%w: state: %v", ErrFormat, err)
		}
		_, _ = sum.Write(part)
	}
	var got [sumLen]byte
	if _, err := io.ReadFull(r, got[:]); err != nil {
		return Header{}, nil, fmt.Errorf("%w: checksum: %v", ErrFormat, err)
	}
	if binary.LittleEndian.Uint32(got[:]) != sum.Sum32() {
		return Header{}, nil, fmt.Errorf("%w: checksum mismatch", ErrFormat)
	}
	return h, state, nil
}

// writeEntry writes the whole file of an entry to w.
func writeEntry(w io.Writer, k Key, tokens []int32, state []byte) error {
	sum := crc32.New(castagnoli)
	mw := io.MultiWriter(w, sum)
	if _, err := mw.Write(encodeHeader(k, tokens, int64(len(state)))); err != nil {
		return err
	}
	if _, err := mw.Write(state); err != nil {
		return err
	}
	_, err := w.Write(binary.LittleEndian.AppendUint32(nil, sum.Sum32()))
	return err
}
