package tokenizer

import (
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"testing"
)

// goldens.json files are written by scripts/goldens/tokenizer/gen.mjs, which
// runs transformers.js on the tokenizer files next to them.
type goldenFile struct {
	Tokenizer      string   `json:"tokenizer"`
	ModelMaxLength *float64 `json:"model_max_length"`
	PaddingSide    string   `json:"padding_side"`
	PadTokenID     *int64   `json:"pad_token_id"`
	Cases          []gCase  `json:"cases"`
	Pairs          []gCase  `json:"pairs"`
	Truncation     []gCase  `json:"truncation"`
	Padding        []gPad   `json:"padding"`
}

type gCase struct {
	Text               string  `json:"text"`
	TextPair           *string `json:"text_pair"`
	MaxLength          int     `json:"max_length"`
	IDs                []int64 `json:"ids"`
	AttentionMask      []int64 `json:"attention_mask"`
	TokenTypeIDs       []int64 `json:"token_type_ids"`
	IDsNoSpecial       []int64 `json:"ids_no_special"`
	Decoded            *string `json:"decoded"`
	DecodedSkipSpecial *string `json:"decoded_skip_special"`
}

type gPad struct {
	Texts         []string  `json:"texts"`
	Padding       string    `json:"padding"`
	MaxLength     int       `json:"max_length"`
	IDs           [][]int64 `json:"ids"`
	AttentionMask [][]int64 `json:"attention_mask"`
	TokenTypeIDs  [][]int64 `json:"token_type_ids"`
}

var goldenNames = []string{
	"bert-uncased", "llama3", "qwen3", "mistral", "unigram", "wordpiece-a", "wordpiece-b", "bpe-roberta",
}

var loaded sync.Map // name -> *Tokenizer

func loadFixture(t testing.TB, name string) *Tokenizer {
	t.Helper()
	if tk, ok := loaded.Load(name); ok {
		return tk.(*Tokenizer)
	}
	tk, err := Load(filepath.Join("testdata", name))
	if err != nil {
		t.Fatalf("load %s: %v", name, err)
	}
	loaded.Store(name, tk)
	return tk
}

func readGolden(t *testing.T, name string) goldenFile {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", name, "goldens.json"))
	if err != nil {
		t.Fatal(err)
	}
	var g goldenFile
	if err := json.Unmarshal(b, &g); err != nil {
		t.Fatal(err)
	}
	return g
}

// bareByteLevelPair reports whether the tokenizer's post-processor is a
// lone ByteLevel, where transformers.js drops the second text of a pair.
func bareByteLevelPair(tk *Tokenizer) bool {
	_, ok := tk.post.(byteLevelPost)
	return ok
}

func TestGoldens(t *testing.T) {
	for _, name := range goldenNames {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			tk := loadFixture(t, name)
			g := readGolden(t, name)
			if len(g.Cases) < 200 {
				t.Fatalf("only %d golden strings", len(g.Cases))
			}
			total, match := 0, 0
			check := func(what, text string, got, want []int64) {
				total++
				if slices.Equal(got, want) {
					match++
					return
				}
				if total-match <= 15 {
					t.Errorf("%s %q:\n got %v\nwant %v", what, text, got, want)
				}
			}
			for _, c := range g.Cases {
				enc := tk.Encode(c.Text)
				check("ids", c.Text, enc.IDs, c.IDs)
				check("mask", c.Text, enc.AttentionMask, c.AttentionMask)
				if c.TokenTypeIDs != nil {
					check("type ids", c.Text, enc.TypeIDs, c.TokenTypeIDs)
				}
				check("ids without special tokens", c.Text, tk.Encode(c.Text, WithoutSpecialTokens()).IDs, c.IDsNoSpecial)
				if c.Decoded != nil {
					total += 2
					if got := tk.Decode(c.IDs, false); got == *c.Decoded {
						match++
					} else if total-match <= 15 {
						t.Errorf("decode %v:\n got %q\nwant %q", c.IDs, got, *c.Decoded)
					}
					if got := tk.Decode(c.IDs, true); got == *c.DecodedSkipSpecial {
						match++
					} else if total-match <= 15 {
						t.Errorf("decode (skip special) %v:\n got %q\nwant %q", c.IDs, got, *c.DecodedSkipSpecial)
					}
				}
			}
			for _, c := range g.Pairs {
				if bareByteLevelPair(tk) {
					continue // see TestByteLevelPairKeepsBothTexts
				}
				enc := tk.EncodePair(c.Text, *c.TextPair)
				check("pair ids", c.Text+" | "+*c.TextPair, enc.IDs, c.IDs)
				if c.TokenTypeIDs != nil {
					check("pair type ids", c.Text+" | "+*c.TextPair, enc.TypeIDs, c.TokenTypeIDs)
				}
			}
			for _, c := range g.Truncation {
				var enc *Encoding
				if c.TextPair != nil {
					if bareByteLevelPair(tk) {
						continue
					}
					enc = tk.EncodePair(c.Text, *c.TextPair, WithTruncation(c.MaxLength))
				} else {
					enc = tk.Encode(c.Text, WithTruncation(c.MaxLength))
				}
				check("truncated ids", c.Text, enc.IDs, c.IDs)
				check("truncated mask", c.Text, enc.AttentionMask, c.AttentionMask)
				if c.TokenTypeIDs != nil {
					check("truncated type ids", c.Text, enc.TypeIDs, c.TokenTypeIDs)
				}
			}
			for _, p := range g.Padding {
				opts := []Option{WithTruncation(p.MaxLength), WithPadding(PadLongest)}
				if p.Padding == "max_length" {
					opts[1] = WithPadding(PadMaxLength)
				}
				encs := tk.EncodeBatch(p.Texts, opts...)
				for i, e := range encs {
					check("padded ids", p.Texts[i], e.IDs, p.IDs[i])
					check("padded mask", p.Texts[i], e.AttentionMask, p.AttentionMask[i])
					if p.TokenTypeIDs != nil {
						check("padded type ids", p.Texts[i], e.TypeIDs, p.TokenTypeIDs[i])
					}
				}
			}
			t.Logf("%s: %d/%d golden comparisons match (%d strings)", name, match, total, len(g.Cases))
			if match != total {
				t.Errorf("%s: %d of %d comparisons differ", name, total-match, total)
			}
			if want := g.ModelMaxLength; want != nil && *want < 1<<31 && float64(tk.MaxLength()) != *want {
				t.Errorf("MaxLength = %d, want %v", tk.MaxLength(), *want)
			}
			if tk.PaddingSide() != g.PaddingSide {
				t.Errorf("PaddingSide = %q, want %q", tk.PaddingSide(), g.PaddingSide)
			}
			if g.PadTokenID != nil {
				if id, ok := tk.PadID(); !ok || id != *g.PadTokenID {
					t.Errorf("PadID = %d, %v; want %d", id, ok, *g.PadTokenID)
				}
			}
		})
	}
}

// TestRegexGoldens compares Split (Isolated) pieces against the reference
// for pre-tokenizer regexes of other tokenizers and for rewritten syntax.
func TestRegexGoldens(t *testing.T) {
	b, err := os.ReadFile(filepath.Join("testdata", "regex_goldens.json"))
	if err != nil {
		t.Fatal(err)
	}
	var sets []struct {
		Name    string `json:"name"`
		Pattern string `json:"pattern"`
		Cases   []struct {
			Text   string   `json:"text"`
			Pieces []string `json:"pieces"`
		} `json:"cases"`
	}
	if err := json.Unmarshal(b, &sets); err != nil {
		t.Fatal(err)
	}
	if len(sets) == 0 {
		t.Fatal("no regex goldens")
	}
	for _, set := range sets {
		raw, _ := json.Marshal(map[string]string{"Regex": set.Pattern})
		p, err := newPattern(raw, false)
		if err != nil {
			t.Errorf("%s: %v", set.Name, err)
			continue
		}
		bad := 0
		for _, c := range set.Cases {
			if got := p.isolate(nil, c.Text); !slices.Equal(got, c.Pieces) && !(len(got) == 0 && len(c.Pieces) == 0) {
				if bad++; bad <= 5 {
					t.Errorf("%s on %q:\n got %q\nwant %q", set.Name, c.Text, got, c.Pieces)
				}
			}
		}
		t.Logf("%s: %d/%d strings match", set.Name, len(set.Cases)-bad, len(set.Cases))
	}
}
