package engine

import (
	"errors"
	"strings"
	"testing"

	"github.com/modeld/modeld/internal/ggufgen"
)

func TestTokenizeRoundTrip(t *testing.T) {
	texts := []string{
		"Hello world",
		"Grüße, naïve café — déjà vu!",
		"日本語のテキスト 🙂 and ASCII",
		"tabs\tand\nnewlines\r\n  spaces",
		"Ελληνικά · русский · עברית",
	}
	for _, kind := range bothVocabs {
		t.Run(kind.String(), func(t *testing.T) {
			m := openModel(t, ggufgen.Tiny(kind), Options{Slots: 1})
			for _, text := range texts {
				ids, err := m.Tokenize(text, false, false)
				if err != nil {
					t.Fatal(err)
				}
				if len(ids) == 0 {
					t.Fatalf("%q gave no tokens", text)
				}
				got, err := m.Detokenize(ids, false)
				if err != nil {
					t.Fatal(err)
				}
				if got != text {
					t.Errorf("round trip of %q gave %q (ids %v)", text, got, ids)
				}
				// The pieces, as a generation streams them, make up the
				// same bytes (SPM adds its leading space).
				var sb strings.Builder
				for _, id := range ids {
					p, err := m.TokenPiece(id, false)
					if err != nil {
						t.Fatal(err)
					}
					sb.WriteString(p)
				}
				want := text
				if kind == ggufgen.SPM {
					want = " " + text
				}
				if sb.String() != want {
					t.Errorf("pieces of %q join to %q", text, sb.String())
				}
			}
		})
	}
}

func TestTokenizeSpecial(t *testing.T) {
	for _, kind := range bothVocabs {
		t.Run(kind.String(), func(t *testing.T) {
			m := openModel(t, ggufgen.Tiny(kind), Options{Slots: 1})
			parsed, err := m.Tokenize(ggufgen.IMStart+"user", false, true)
			if err != nil {
				t.Fatal(err)
			}
			plain, err := m.Tokenize(ggufgen.IMStart+"user", false, false)
			if err != nil {
				t.Fatal(err)
			}
			if len(parsed) >= len(plain) {
				t.Errorf("parseSpecial gave %d tokens, plain %d: the marker was not one token", len(parsed), len(plain))
			}
			start := parsed[0]
			if got, _ := m.TokenPiece(start, true); got != ggufgen.IMStart {
				t.Errorf("first token renders as %q with specials", got)
			}
			if got, _ := m.TokenPiece(start, false); got != "" {
				t.Errorf("control token renders as %q without specials", got)
			}
			end, err := m.Tokenize(ggufgen.IMEnd, false, true)
			if err != nil || len(end) != 1 {
				t.Fatalf("%s gave %v, %v", ggufgen.IMEnd, end, err)
			}
			if !m.IsEndOfGeneration(end[0]) {
				t.Errorf("%s is not an end-of-generation token", ggufgen.IMEnd)
			}
			if m.IsEndOfGeneration(start) {
				t.Errorf("%s is an end-of-generation token", ggufgen.IMStart)
			}
			bos, err := m.Tokenize("hi", true, false)
			if err != nil {
				t.Fatal(err)
			}
			if addsBOS := bos[0] == m.Info().BOS; addsBOS != (kind == ggufgen.SPM) {
				t.Errorf("addSpecial BOS = %v for %s", addsBOS, kind)
			}
		})
	}
}

func TestTokenizeRejectsNUL(t *testing.T) {
	m := openModel(t, ggufgen.Tiny(ggufgen.SPM), Options{Slots: 1})
	if _, err := m.Tokenize("a\x00b", false, false); !errors.Is(err, ErrInvalidRequest) {
		t.Errorf("NUL in text: err = %v, want ErrInvalidRequest", err)
	}
	if _, err := m.TokenPiece(int32(m.Info().VocabSize), false); !errors.Is(err, ErrInvalidRequest) {
		t.Errorf("token outside the vocabulary: err = %v", err)
	}
}
