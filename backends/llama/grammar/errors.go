package grammar

import (
	"errors"
	"fmt"
)

// ErrSchema matches every error FromSchema returns for a schema it cannot
// turn into a grammar: errors.Is(err, ErrSchema) is the caller's cue for a
// client error (400). errors.As to *UnsupportedError, *InvalidError or
// *LimitError gives the detail.
var ErrSchema = errors.New("grammar: schema not convertible")

// UnsupportedError is a keyword (or a use of one) the converter cannot
// enforce. Keyword is the JSON Schema keyword; Path is the JSON pointer of
// the schema holding it.
type UnsupportedError struct {
	Keyword string
	Path    string
	Reason  string
}

func (e *UnsupportedError) Error() string {
	msg := fmt.Sprintf("grammar: unsupported JSON Schema keyword %q at %s", e.Keyword, pathOrRoot(e.Path))
	if e.Reason != "" {
		msg += ": " + e.Reason
	}
	return msg
}

// Is makes errors.Is(err, ErrSchema) hold.
func (e *UnsupportedError) Is(target error) bool { return target == ErrSchema }

// InvalidError is a schema that is malformed or accepts nothing.
type InvalidError struct {
	Path   string
	Reason string
}

func (e *InvalidError) Error() string {
	return fmt.Sprintf("grammar: invalid JSON Schema at %s: %s", pathOrRoot(e.Path), e.Reason)
}

// Is makes errors.Is(err, ErrSchema) hold.
func (e *InvalidError) Is(target error) bool { return target == ErrSchema }

// LimitError is a schema whose grammar would pass one of the Limits.
type LimitError struct {
	Limit string // the Limits field
	Max   int
	Path  string
}

func (e *LimitError) Error() string {
	return fmt.Sprintf("grammar: schema too large at %s: over the %s bound of %d", pathOrRoot(e.Path), e.Limit, e.Max)
}

// Is makes errors.Is(err, ErrSchema) hold.
func (e *LimitError) Is(target error) bool { return target == ErrSchema }

func pathOrRoot(p string) string {
	if p == "" {
		return "#"
	}
	return "#" + p
}
