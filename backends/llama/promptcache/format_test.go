package promptcache

import (
	"bytes"
	"errors"
	"slices"
	"testing"
)

func encode(t testing.TB, k Key, tokens []int32, st []byte) []byte {
	var b bytes.Buffer
	if err := writeEntry(&b, k, tokens, st); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

func TestFormatRoundTrip(t *testing.T) {
	file := encode(t, keyA, []int32{1, -2, 3}, []byte("state bytes"))
	h, st, err := readEntry(bytes.NewReader(file), int64(len(file)), &keyA)
	if err != nil || h.Key != keyA || !slices.Equal(h.Tokens, []int32{1, -2, 3}) || string(st) != "state bytes" {
		t.Fatalf("%+v %q %v", h, st, err)
	}
	if h.fileSize() != int64(len(file)) {
		t.Fatalf("file size %d, want %d", h.fileSize(), len(file))
	}
	// Every shorter prefix of the file is refused by the header check or
	// the read, never accepted.
	for n := 0; n < len(file); n++ {
		if _, _, err := readEntry(bytes.NewReader(file[:n]), int64(n), &keyA); !errors.Is(err, ErrFormat) {
			t.Fatalf("a file cut to %d bytes: %v", n, err)
		}
	}
	// Every single flipped bit is refused.
	for i := range file {
		for bit := 0; bit < 8; bit++ {
			bad := slices.Clone(file)
			bad[i] ^= 1 << bit
			if _, _, err := readEntry(bytes.NewReader(bad), int64(len(bad)), &keyA); err == nil {
				t.Fatalf("byte %d bit %d flipped was accepted", i, bit)
			}
		}
	}
}

// FuzzReadHeader: any bytes either fail with ErrFormat or give a header
// whose lengths add up to the input's length exactly; the whole read of an
// accepted header never allocates past the input, and a valid file's read
// gives back what was written.
func FuzzReadHeader(f *testing.F) {
	f.Add(encode(f, keyA, []int32{1, 2, 3}, []byte("xyz")))
	f.Add(encode(f, Key{}, []int32{0}, []byte{0}))
	f.Add([]byte(magic))
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, data []byte) {
		size := int64(len(data))
		h, err := ReadHeader(bytes.NewReader(data), size)
		if err != nil {
			if !errors.Is(err, ErrFormat) {
				t.Fatalf("error %v does not wrap ErrFormat", err)
			}
			return
		}
		if h.fileSize() != size || len(h.Tokens) == 0 || h.StateLen <= 0 || h.StateOff+h.StateLen > size {
			t.Fatalf("accepted header %+v does not fit %d bytes", h, size)
		}
		h2, st, err := readEntry(bytes.NewReader(data), size, nil)
		if err == nil {
			if int64(len(st)) != h.StateLen || !slices.Equal(h2.Tokens, h.Tokens) {
				t.Fatalf("read %d state bytes, header says %d", len(st), h.StateLen)
			}
			again := encode(t, h2.Key, h2.Tokens, st)
			if !bytes.Equal(again, data) {
				t.Fatal("a valid file does not encode back to itself")
			}
		} else if !errors.Is(err, ErrFormat) {
			t.Fatalf("error %v does not wrap ErrFormat", err)
		}
	})
}
