package tokenizer

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"math"
	"os"
	"path/filepath"
	"strings"
)

// Tokenizer encodes text to token ids and decodes ids to text. It is
// immutable after loading and safe for concurrent use.
type Tokenizer struct {
	norm  normalizer
	pre   preTokenizer
	model model
	post  postProcessor
	dec   decoder
	vocab *vocab

	added     map[string]addedToken // by content and by normalized content
	special   map[string]bool       // contents skipped by Decode(ids, true)
	splitRaw  *splitter             // added tokens matched before normalization
	splitNorm *splitter             // added tokens matched after normalization
	eowSuffix string                // BPE end_of_word_suffix, for Decode

	maxLength    int
	paddingSide  string
	cleanUp      bool
	removeSpace  bool
	lowerStrip   bool
	specialNames map[string]string // "cls_token" -> content
}

// file names in a model folder.
const (
	tokenizerFile   = "tokenizer.json"
	tokenizerGzFile = "tokenizer.json.gz"
	configFile      = "tokenizer_config.json"
)

// Load reads dir/tokenizer.json (or dir/tokenizer.json.gz) and, when
// present, dir/tokenizer_config.json. Files over MaxTokenizerBytes and
// MaxConfigBytes are refused.
func Load(dir string) (*Tokenizer, error) {
	path := filepath.Join(dir, tokenizerFile)
	if _, err := os.Stat(path); errors.Is(err, fs.ErrNotExist) {
		path = filepath.Join(dir, tokenizerGzFile)
	}
	tj, err := readCapped(path, MaxTokenizerBytes)
	if err != nil {
		return nil, fmt.Errorf("tokenizer: %w", err)
	}
	cj, err := readCapped(filepath.Join(dir, configFile), MaxConfigBytes)
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("tokenizer: %w", err)
	}
	t, err := New(tj, cj)
	if err != nil {
		return nil, fmt.Errorf("tokenizer %s: %w", dir, err)
	}
	return t, nil
}

// FromFile reads one tokenizer.json (gzip-compressed when it starts with the
// gzip magic bytes) without a tokenizer_config.json.
func FromFile(path string) (*Tokenizer, error) {
	tj, err := readCapped(path, MaxTokenizerBytes)
	if err != nil {
		return nil, fmt.Errorf("tokenizer: %w", err)
	}
	t, err := New(tj, nil)
	if err != nil {
		return nil, fmt.Errorf("tokenizer %s: %w", path, err)
	}
	return t, nil
}

type tokenizerJSON struct {
	AddedTokens   json.RawMessage `json:"added_tokens"`
	Normalizer    json.RawMessage `json:"normalizer"`
	PreTokenizer  json.RawMessage `json:"pre_tokenizer"`
	Model         json.RawMessage `json:"model"`
	PostProcessor json.RawMessage `json:"post_processor"`
	Decoder       json.RawMessage `json:"decoder"`
}

// New builds a tokenizer from the bytes of tokenizer.json and of
// tokenizer_config.json (nil or empty when there is none). Every component
// type is checked: an unknown one is an error, never a silent default.
func New(tokenizerJSONBytes, configJSON []byte) (t *Tokenizer, err error) {
	if len(tokenizerJSONBytes) > MaxTokenizerBytes {
		return nil, fmt.Errorf("tokenizer.json is %d bytes, more than %d", len(tokenizerJSONBytes), MaxTokenizerBytes)
	}
	if len(configJSON) > MaxConfigBytes {
		return nil, fmt.Errorf("tokenizer_config.json is %d bytes, more than %d", len(configJSON), MaxConfigBytes)
	}
	// Normalizing the added tokens runs the model's patterns already.
	defer catch(&err)
	load := &run{ctx: context.Background()}
	var tj tokenizerJSON
	if err := json.Unmarshal(tokenizerJSONBytes, &tj); err != nil {
		return nil, fmt.Errorf("parse tokenizer.json: %w", err)
	}
	cfg, err := parseConfig(configJSON)
	if err != nil {
		return nil, err
	}
	t = &Tokenizer{
		added:        map[string]addedToken{},
		special:      map[string]bool{},
		paddingSide:  cfg.paddingSide,
		cleanUp:      cfg.cleanUp,
		removeSpace:  cfg.removeSpace,
		lowerStrip:   cfg.lowerStrip,
		maxLength:    cfg.maxLength,
		specialNames: cfg.specialNames,
	}
	var errs []error
	if t.norm, err = newNormalizer(tj.Normalizer); err != nil {
		errs = append(errs, err)
	}
	if t.pre, err = newPreTokenizer(tj.PreTokenizer); err != nil {
		errs = append(errs, err)
	}
	if t.model, t.vocab, err = newModel(tj.Model); err != nil {
		errs = append(errs, err)
	}
	if t.post, err = newPostProcessor(tj.PostProcessor); err != nil {
		errs = append(errs, err)
	}
	added, err := parseAddedTokens(tj.AddedTokens)
	if err != nil {
		errs = append(errs, err)
	}
	env := &decoderEnv{added: map[string]bool{}}
	if t.dec, err = newDecoder(tj.Decoder, env); err != nil {
		errs = append(errs, err)
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	if b, ok := t.model.(*bpe); ok {
		t.eowSuffix = b.endOfWordSuffix
	}
	var raw, normed []string
	for _, a := range added {
		t.vocab.set(a.Content, a.ID)
		env.added[a.Content] = true
		if a.Special {
			t.special[a.Content] = true
		}
		t.added[a.Content] = a
		if a.normalizedFlag() && t.norm != nil {
			n := t.norm.normalize(load, a.Content)
			normed = append(normed, n)
			t.added[n] = a
		} else {
			raw = append(raw, a.Content)
		}
	}
	if u, ok := t.model.(*unigram); ok {
		u.finish()
	}
	for _, s := range cfg.additionalSpecial {
		t.special[s] = true
	}
	t.splitRaw, t.splitNorm = newSplitter(raw), newSplitter(normed)
	return t, nil
}

// tokenizerConfig is what modeld reads from tokenizer_config.json.
type tokenizerConfig struct {
	maxLength         int
	paddingSide       string
	cleanUp           bool
	removeSpace       bool
	lowerStrip        bool
	specialNames      map[string]string
	additionalSpecial []string
}

func parseConfig(b []byte) (tokenizerConfig, error) {
	cfg := tokenizerConfig{paddingSide: "right", cleanUp: true, specialNames: map[string]string{}}
	if len(bytes.TrimSpace(b)) == 0 {
		return cfg, nil
	}
	var c map[string]json.RawMessage
	if err := json.Unmarshal(b, &c); err != nil {
		return cfg, fmt.Errorf("parse tokenizer_config.json: %w", err)
	}
	var errs []error
	get := func(key string, dst any) {
		if raw, ok := c[key]; ok && !isNull(raw) {
			if err := json.Unmarshal(raw, dst); err != nil {
				errs = append(errs, fmt.Errorf("tokenizer_config.json %s: %w", key, err))
			}
		}
	}
	var maxLen float64
	get("model_max_length", &maxLen)
	// Values such as 1e30 mean "no limit".
	if maxLen >= 1 && maxLen <= math.MaxInt32 {
		cfg.maxLength = int(maxLen)
	}
	var class string
	get("tokenizer_class", &class)
	if strings.TrimSuffix(class, "Fast") == "LlamaTokenizer" {
		cfg.paddingSide = "left"
	}
	get("padding_side", &cfg.paddingSide)
	if cfg.paddingSide != "left" && cfg.paddingSide != "right" {
		errs = append(errs, fmt.Errorf("tokenizer_config.json padding_side %q", cfg.paddingSide))
	}
	get("clean_up_tokenization_spaces", &cfg.cleanUp)
	get("remove_space", &cfg.removeSpace)
	get("do_lowercase_and_remove_accent", &cfg.lowerStrip)
	for _, key := range []string{"bos_token", "eos_token", "unk_token", "sep_token", "pad_token", "cls_token", "mask_token"} {
		if raw, ok := c[key]; ok {
			s, err := tokenContent(raw)
			if err != nil {
				errs = append(errs, fmt.Errorf("tokenizer_config.json %s: %w", key, err))
			}
			if s != "" {
				cfg.specialNames[key] = s
			}
		}
	}
	var extra []json.RawMessage
	get("additional_special_tokens", &extra)
	for _, raw := range extra {
		if s, err := tokenContent(raw); err == nil && s != "" {
			cfg.additionalSpecial = append(cfg.additionalSpecial, s)
		}
	}
	return cfg, errors.Join(errs...)
}

// tokenContent reads a special token given as a string or as an
// {"content": ...} object.
func tokenContent(raw json.RawMessage) (string, error) {
	if isNull(raw) {
		return "", nil
	}
	var s string
	if err := json.Unmarshal(raw, &s); err == nil {
		return s, nil
	}
	var obj struct {
		Content *string `json:"content"`
	}
	if err := json.Unmarshal(raw, &obj); err != nil || obj.Content == nil {
		return "", fmt.Errorf("want a string or an object with content: %s", raw)
	}
	return *obj.Content, nil
}
