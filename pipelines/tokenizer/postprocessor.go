package tokenizer

import (
	"encoding/json"
	"fmt"
)

// postProcessor adds special tokens around one sequence or a pair. b is nil
// for a single sequence. typeIDs is nil when the processor assigns none.
type postProcessor interface {
	process(a, b []string, addSpecial bool) (toks []string, typeIDs []int64)
}

func newPostProcessor(raw json.RawMessage) (postProcessor, error) {
	if isNull(raw) {
		return nil, nil
	}
	typ, err := componentType(raw)
	if err != nil {
		return nil, fmt.Errorf("post_processor: %w", err)
	}
	switch typ {
	case "TemplateProcessing":
		var c struct {
			Single []templateItem `json:"single"`
			Pair   []templateItem `json:"pair"`
		}
		if err := json.Unmarshal(raw, &c); err != nil {
			return nil, fmt.Errorf("TemplateProcessing: %w", err)
		}
		for _, it := range append(append([]templateItem{}, c.Single...), c.Pair...) {
			if it.SpecialToken == nil && it.Sequence == nil {
				return nil, fmt.Errorf("TemplateProcessing: item is neither SpecialToken nor Sequence")
			}
		}
		return template{single: c.Single, pair: c.Pair}, nil
	case "BertProcessing", "RobertaProcessing":
		var c struct {
			Sep []json.RawMessage `json:"sep"`
			Cls []json.RawMessage `json:"cls"`
		}
		if err := json.Unmarshal(raw, &c); err != nil {
			return nil, fmt.Errorf("%s: %w", typ, err)
		}
		var p clsSep
		if len(c.Sep) == 0 || len(c.Cls) == 0 {
			return nil, fmt.Errorf("%s: needs cls and sep", typ)
		}
		if err := json.Unmarshal(c.Sep[0], &p.sep); err != nil {
			return nil, fmt.Errorf("%s sep: %w", typ, err)
		}
		if err := json.Unmarshal(c.Cls[0], &p.cls); err != nil {
			return nil, fmt.Errorf("%s cls: %w", typ, err)
		}
		p.roberta = typ == "RobertaProcessing"
		return p, nil
	case "ByteLevel":
		return byteLevelPost{}, nil
	case "Sequence":
		var c struct {
			Processors []json.RawMessage `json:"processors"`
		}
		if err := json.Unmarshal(raw, &c); err != nil {
			return nil, fmt.Errorf("post_processor Sequence: %w", err)
		}
		var seq postSequence
		for i, r := range c.Processors {
			p, err := newPostProcessor(r)
			if err != nil {
				return nil, fmt.Errorf("post_processor Sequence[%d]: %w", i, err)
			}
			if p != nil {
				seq = append(seq, p)
			}
		}
		return seq, nil
	}
	return nil, fmt.Errorf("unknown post_processor type %q", typ)
}

type templateItem struct {
	SpecialToken *struct {
		ID     string `json:"id"`
		TypeID int64  `json:"type_id"`
	} `json:"SpecialToken"`
	Sequence *struct {
		ID     string `json:"id"`
		TypeID int64  `json:"type_id"`
	} `json:"Sequence"`
}

type template struct {
	single, pair []templateItem
}

func (t template) process(a, b []string, addSpecial bool) ([]string, []int64) {
	items := t.single
	if b != nil {
		items = t.pair
	}
	var toks []string
	var types []int64
	for _, it := range items {
		switch {
		case it.SpecialToken != nil:
			if addSpecial {
				toks = append(toks, it.SpecialToken.ID)
				types = append(types, it.SpecialToken.TypeID)
			}
		case it.Sequence.ID == "A":
			toks = append(toks, a...)
			types = appendN(types, it.Sequence.TypeID, len(a))
		case it.Sequence.ID == "B":
			toks = append(toks, b...)
			types = appendN(types, it.Sequence.TypeID, len(b))
		}
	}
	return toks, types
}

func appendN(s []int64, v int64, n int) []int64 {
	for i := 0; i < n; i++ {
		s = append(s, v)
	}
	return s
}

// clsSep is BertProcessing ([CLS] A [SEP] B [SEP]) and RobertaProcessing
// (<s> A </s> </s> B </s>); the second sequence gets type id 1 in both.
type clsSep struct {
	cls, sep string
	roberta  bool
}

func (p clsSep) process(a, b []string, addSpecial bool) ([]string, []int64) {
	var toks []string
	if addSpecial {
		toks = append(toks, p.cls)
	}
	toks = append(toks, a...)
	if addSpecial {
		toks = append(toks, p.sep)
	}
	types := appendN(nil, 0, len(toks))
	if b != nil {
		n := len(toks)
		if addSpecial && p.roberta {
			toks = append(toks, p.sep)
		}
		toks = append(toks, b...)
		if addSpecial {
			toks = append(toks, p.sep)
		}
		types = appendN(types, 1, len(toks)-n)
	}
	return toks, types
}

// byteLevelPost adds nothing. The reference drops the second sequence of a
// pair here; modeld concatenates it instead (see the package doc).
type byteLevelPost struct{}

func (byteLevelPost) process(a, b []string, _ bool) ([]string, []int64) {
	toks := append(append([]string{}, a...), b...)
	return toks, nil
}

// postSequence runs processors in turn. Like the reference, each step sees
// the first sequence and the pair unchanged except through the last
// processor that merges them; a ByteLevel step passes both through.
type postSequence []postProcessor

func (s postSequence) process(a, b []string, addSpecial bool) ([]string, []int64) {
	var merged []string
	var types []int64
	pending := true
	for _, p := range s {
		if _, ok := p.(byteLevelPost); ok && pending {
			continue
		}
		merged, types = p.process(a, b, addSpecial)
		a, b, pending = merged, nil, false
	}
	if pending {
		return byteLevelPost{}.process(a, b, addSpecial)
	}
	return merged, types
}
