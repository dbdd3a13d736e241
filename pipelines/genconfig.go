package pipelines

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/modeld/modeld/backends"
)

// EarlyStopping is beam search's stopping rule (backends').
type EarlyStopping = backends.EarlyStopping

// Stopping rules.
const (
	EarlyStoppingDefault = backends.EarlyStoppingDefault
	EarlyStoppingTrue    = backends.EarlyStoppingTrue
	EarlyStoppingFalse   = backends.EarlyStoppingFalse
	EarlyStoppingNever   = backends.EarlyStoppingNever
)

// ParseEarlyStopping accepts "true", "false" and "never"; "" is the default.
func ParseEarlyStopping(s string) (EarlyStopping, error) { return backends.ParseEarlyStopping(s) }

// generationConfig holds generation settings as config.json and
// generation_config.json spell them; nil means unset.
type generationConfig struct {
	DecoderStartTokenID *int64          `json:"decoder_start_token_id"`
	BOSTokenID          *int64          `json:"bos_token_id"`
	EOSTokenID          json.RawMessage `json:"eos_token_id"`
	PadTokenID          *int64          `json:"pad_token_id"`
	MaxLength           *int            `json:"max_length"`
	MaxNewTokens        *int            `json:"max_new_tokens"`
	MinLength           *int            `json:"min_length"`
	MinNewTokens        *int            `json:"min_new_tokens"`
	NumBeams            *int            `json:"num_beams"`
	LengthPenalty       *float64        `json:"length_penalty"`
	EarlyStopping       json.RawMessage `json:"early_stopping"`
	NoRepeatNgramSize   *int            `json:"no_repeat_ngram_size"`
	ForcedBOSTokenID    *int64          `json:"forced_bos_token_id"`
	ForcedEOSTokenID    json.RawMessage `json:"forced_eos_token_id"`
}

// overlay copies the fields set in o over g.
func (g *generationConfig) overlay(o generationConfig) {
	set := func(dst **int64, src *int64) {
		if src != nil {
			*dst = src
		}
	}
	seti := func(dst **int, src *int) {
		if src != nil {
			*dst = src
		}
	}
	setr := func(dst *json.RawMessage, src json.RawMessage) {
		if len(src) > 0 && string(src) != "null" {
			*dst = src
		}
	}
	set(&g.DecoderStartTokenID, o.DecoderStartTokenID)
	set(&g.BOSTokenID, o.BOSTokenID)
	setr(&g.EOSTokenID, o.EOSTokenID)
	set(&g.PadTokenID, o.PadTokenID)
	seti(&g.MaxLength, o.MaxLength)
	seti(&g.MaxNewTokens, o.MaxNewTokens)
	seti(&g.MinLength, o.MinLength)
	seti(&g.MinNewTokens, o.MinNewTokens)
	seti(&g.NumBeams, o.NumBeams)
	if o.LengthPenalty != nil {
		g.LengthPenalty = o.LengthPenalty
	}
	setr(&g.EarlyStopping, o.EarlyStopping)
	seti(&g.NoRepeatNgramSize, o.NoRepeatNgramSize)
	set(&g.ForcedBOSTokenID, o.ForcedBOSTokenID)
	setr(&g.ForcedEOSTokenID, o.ForcedEOSTokenID)
}

// readGenerationConfig reads config.json's generation fields, then
// generation_config.json over them (the order transformers.js applies).
func readGenerationConfig(dir string) (generationConfig, error) {
	var g generationConfig
	for _, name := range []string{"config.json", "generation_config.json"} {
		b, err := os.ReadFile(filepath.Join(dir, name))
		if errors.Is(err, fs.ErrNotExist) && name != "config.json" {
			continue
		}
		if err != nil {
			return g, fmt.Errorf("pipelines: %w", err)
		}
		var o generationConfig
		if err := json.Unmarshal(b, &o); err != nil {
			return g, fmt.Errorf("pipelines: %s: %w", filepath.Join(dir, name), err)
		}
		g.overlay(o)
	}
	return g, nil
}

// ids reads a token id field that may be a number or a list of numbers.
func ids(raw json.RawMessage) ([]int64, error) {
	if len(raw) == 0 || string(raw) == "null" {
		return nil, nil
	}
	var one int64
	if err := json.Unmarshal(raw, &one); err == nil {
		return []int64{one}, nil
	}
	var many []int64
	if err := json.Unmarshal(raw, &many); err != nil {
		return nil, fmt.Errorf("token id %s is neither a number nor a list of numbers", raw)
	}
	return many, nil
}

func earlyStopping(raw json.RawMessage) (EarlyStopping, error) {
	switch string(raw) {
	case "", "null", "false":
		return EarlyStoppingFalse, nil
	case "true":
		return EarlyStoppingTrue, nil
	case `"never"`:
		return EarlyStoppingNever, nil
	}
	return 0, fmt.Errorf("early_stopping %s (want true, false or \"never\")", raw)
}
