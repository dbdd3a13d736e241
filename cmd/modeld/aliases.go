package main

import (
	"errors"
	"fmt"
	"path"
	"strings"

	"github.com/modeld/modeld/models"
)

// modelAlias maps the model names a request may give (a pattern: * and ?
// as in path.Match, so claude-sonnet-* covers every dated Sonnet id) to a
// model of the store.
type modelAlias struct {
	Pattern string `json:"pattern"`
	Target  string `json:"target"`
}

// modelAliases are the --model-aliases setting, in the order given: the
// first pattern that matches wins.
type modelAliases []modelAlias

// parseAliases reads PATTERN=ID pairs separated by commas.
func parseAliases(v string) (modelAliases, error) {
	var out modelAliases
	var errs []error
	for _, item := range splitList(v) {
		pat, target, ok := strings.Cut(item, "=")
		pat, target = strings.TrimSpace(pat), strings.TrimSpace(target)
		if !ok || pat == "" || target == "" {
			errs = append(errs, fmt.Errorf("%q is not PATTERN=MODEL", item))
			continue
		}
		if _, err := path.Match(pat, ""); err != nil {
			errs = append(errs, fmt.Errorf("pattern %q: %w", pat, err))
			continue
		}
		id, err := models.Canonical(target)
		if err != nil {
			errs = append(errs, fmt.Errorf("target of %q: %w", pat, err))
			continue
		}
		out = append(out, modelAlias{Pattern: pat, Target: id})
	}
	return out, errors.Join(errs...)
}

// String is the setting as it is written.
func (as modelAliases) String() string {
	parts := make([]string, len(as))
	for i, a := range as {
		parts[i] = a.Pattern + "=" + a.Target
	}
	return strings.Join(parts, ",")
}

// match is the target of the first alias whose pattern matches name.
func (as modelAliases) match(name string) (string, bool) {
	for _, a := range as {
		if ok, _ := path.Match(a.Pattern, name); ok {
			return a.Target, true
		}
	}
	return "", false
}

// of lists the patterns that point at id.
func (as modelAliases) of(id string) []string {
	var out []string
	for _, a := range as {
		if a.Target == id {
			out = append(out, a.Pattern)
		}
	}
	return out
}

// modelResolver is the one rule every dialect's model lookup follows: a
// name the store holds is that model; any other name is the target of the
// first alias that matches it; else the name as given (which then answers
// "model not found").
func modelResolver(st *models.Store, as modelAliases) func(string) string {
	if len(as) == 0 {
		return nil
	}
	return func(name string) string {
		if _, err := st.Get(name); err == nil {
			return name
		}
		if target, ok := as.match(name); ok {
			return target
		}
		return name
	}
}
