package tokenizer

import (
	"bytes"
	"compress/gzip"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"sync"
	"time"
	"unicode/utf8"
)

// Bounds on what a tokenizer.json may declare. A model's files are untrusted
// input: each bound is far above what real tokenizers need and keeps a
// hostile file from exhausting memory or a core.
const (
	// MaxTokenizerBytes bounds tokenizer.json, also after gunzipping
	// tokenizer.json.gz (the largest real ones are ~35 MB).
	MaxTokenizerBytes = 128 << 20
	// MaxConfigBytes bounds tokenizer_config.json (real ones are under 1 MB,
	// chat template and added-token table included).
	MaxConfigBytes = 16 << 20
	// MaxVocab bounds the vocabulary and MaxMerges the BPE merges (real
	// vocabularies have up to ~260k entries, merges up to ~500k).
	MaxVocab  = 1 << 22
	MaxMerges = 1 << 22
	// MaxAddedTokens bounds added_tokens (real files have up to a few
	// thousand) and MaxAddedTokenBytes each one's content (real ones are
	// under 100 bytes); the added-token matcher walks up to that many bytes
	// at each position of the text.
	MaxAddedTokens     = 1 << 18
	MaxAddedTokenBytes = 1024
	// MaxPatternRunes bounds one regex or string pattern (real ones are
	// under 300 characters) and MaxPatternDepth its group nesting (real ones
	// nest 1 to 3 deep).
	MaxPatternRunes = 4096
	MaxPatternDepth = 32
	// MaxWordPieceChars bounds WordPiece's max_input_chars_per_word (real
	// models use 100): its greedy longest match is cubic in it.
	MaxWordPieceChars = 512
	// MatchTimeout bounds one regex match call. Real tokenizer patterns
	// match in microseconds; a catastrophically backtracking one, such as
	// (a+)+$ on a run of a's, would run for ever.
	MatchTimeout = time.Second
	// RegexBudgetBase and RegexBudgetPerRune make the regex time one
	// request may spend (see WithRegexBudget): MatchTimeout, plus 50 µs for
	// each character of its texts. Real patterns spend far less: Llama 3's
	// 1.6 µs and Qwen3's 0.9 µs a character on a loaded 2-core machine
	// (11 and 7 µs under the race detector), so only a pattern that
	// backtracks reaches it, and then costs the request at most some 30
	// times what Llama 3's costs. Without it a hostile pattern that stays
	// just under MatchTimeout costs that much per text: minutes for a
	// request of 2048 short texts.
	RegexBudgetBase    = MatchTimeout
	RegexBudgetPerRune = 50 * time.Microsecond
)

// ErrRegexBudget is wrapped by a *RegexBudgetError.
var ErrRegexBudget = errors.New("tokenizer regex budget spent")

// RegexBudgetError says that one request's texts spent its regex time
// budget: the model's tokenizer.json is at fault (a pattern that
// backtracks), not the request.
type RegexBudgetError struct {
	Pattern string        // the pattern that was running when it ran out (clipped)
	Spent   time.Duration // regex time spent by the request
	Budget  time.Duration // what it was allowed
}

func (e *RegexBudgetError) Error() string {
	return fmt.Sprintf("tokenizer: the model's tokenizer.json regexes spent %v on this request, past its budget of %v (the regex %q backtracks)",
		e.Spent.Round(time.Millisecond), e.Budget.Round(time.Millisecond), e.Pattern)
}

// Unwrap makes errors.Is(err, ErrRegexBudget) and errors.Is(err,
// ErrRegexTimeout) true: both say the tokenizer's patterns are at fault.
func (e *RegexBudgetError) Unwrap() []error { return []error{ErrRegexBudget, ErrRegexTimeout} }

// HTTPStatus is 500: the model is broken, the request is fine.
func (e *RegexBudgetError) HTTPStatus() int { return 500 }

// regexBudget is the regex time one request may still spend, shared by all
// the encode calls of the request. Its methods are safe for concurrent
// use.
type regexBudget struct {
	mu      sync.Mutex
	allowed time.Duration // base plus each text's allowance
	spent   time.Duration
}

type budgetKey struct{}

// WithRegexBudget returns ctx carrying one regex time budget for every
// encode call made with it (or a context derived from it): a request's
// texts share it, so a pattern that backtracks costs the request about one
// budget, not one MatchTimeout per text. The budget is RegexBudgetBase plus
// RegexBudgetPerRune for each character encoded under it. A ctx that has a
// budget already keeps it. Without one, each encode call has its own.
func WithRegexBudget(ctx context.Context) context.Context {
	if _, ok := ctx.Value(budgetKey{}).(*regexBudget); ok {
		return ctx
	}
	return context.WithValue(ctx, budgetKey{}, &regexBudget{allowed: RegexBudgetBase})
}

func budgetOf(ctx context.Context) *regexBudget {
	if b, ok := ctx.Value(budgetKey{}).(*regexBudget); ok {
		return b
	}
	return &regexBudget{allowed: RegexBudgetBase}
}

// allow adds the allowance of a text of n characters.
func (b *regexBudget) allow(n int) {
	b.mu.Lock()
	b.allowed += time.Duration(n) * RegexBudgetPerRune
	b.mu.Unlock()
}

// spend charges d; it reports the totals and whether the budget is spent.
func (b *regexBudget) spend(d time.Duration) (spent, allowed time.Duration, over bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.spent += d
	return b.spent, b.allowed, b.spent > b.allowed
}

// ErrRegexTimeout is wrapped by a *RegexTimeoutError.
var ErrRegexTimeout = errors.New("tokenizer regex timed out")

// RegexTimeoutError says that one of the tokenizer's patterns ran past
// MatchTimeout: the model's tokenizer.json is at fault, not the request.
type RegexTimeoutError struct {
	Pattern string // the pattern from tokenizer.json (clipped)
	Runes   int    // length of the text it was matched against
}

func (e *RegexTimeoutError) Error() string {
	return fmt.Sprintf("tokenizer: the regex %q of the model's tokenizer.json ran past the %v match timeout on a %d-character piece of text (catastrophic backtracking)",
		e.Pattern, MatchTimeout, e.Runes)
}

// Unwrap makes errors.Is(err, ErrRegexTimeout) true.
func (e *RegexTimeoutError) Unwrap() error { return ErrRegexTimeout }

// HTTPStatus is 500: the model is broken, the request is fine.
func (e *RegexTimeoutError) HTTPStatus() int { return 500 }

// run is one encode call: its context, checked between texts, pieces and
// regex matches. A nil *run never stops.
type run struct {
	ctx    context.Context
	budget *regexBudget // regex time, shared by the request's calls
	n      int          // work units since the context was last checked
}

func newRun(ctx context.Context) *run { return &run{ctx: ctx, budget: budgetOf(ctx)} }

// text counts a text of n characters toward the regex budget.
func (r *run) text(s string) {
	if r != nil && r.budget != nil {
		r.budget.allow(utf8.RuneCountInString(s))
	}
}

// regexTime charges a regex call that started at start, ending the call
// with a *RegexBudgetError when the request's budget is spent.
func (r *run) regexTime(start time.Time, pattern string) {
	if r == nil || r.budget == nil {
		return
	}
	if spent, allowed, over := r.budget.spend(time.Since(start)); over {
		r.fail(&RegexBudgetError{Pattern: clipPattern(pattern), Spent: spent, Budget: allowed})
	}
}

// stop is the panic value that ends an encode call early. It never leaves
// the package: every entry point that runs an encode recovers it into its
// error (the pieces of the pipeline have no error results).
type stop struct{ err error }

// check ends the call when its context is done.
func (r *run) check() {
	if r == nil {
		return
	}
	if err := r.ctx.Err(); err != nil {
		panic(stop{fmt.Errorf("tokenizer: encoding stopped: %w", err)})
	}
}

// tick counts n units of work and checks the context every 4096 units.
func (r *run) tick(n int) {
	if r == nil {
		return
	}
	r.n += n
	if r.n >= 4096 {
		r.n = 0
		r.check()
	}
}

// fail ends the call with err.
func (r *run) fail(err error) { panic(stop{err}) }

// catch turns a stop panic into *err; any other panic goes on.
func catch(err *error) {
	if v := recover(); v != nil {
		s, ok := v.(stop)
		if !ok {
			panic(v)
		}
		*err = s.err
	}
}

// readCapped reads the file at path, refusing one of more than limit bytes,
// and gunzips it (with the same limit) when it starts with the gzip magic.
func readCapped(path string, limit int64) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close() //nolint:errcheck // read-only
	st, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if st.Size() > limit {
		return nil, fmt.Errorf("%s is %d bytes, more than the %d a tokenizer file may have", path, st.Size(), limit)
	}
	b, err := io.ReadAll(io.LimitReader(f, limit+1))
	if err != nil {
		return nil, err
	}
	if int64(len(b)) > limit {
		return nil, fmt.Errorf("%s is more than the %d bytes a tokenizer file may have", path, limit)
	}
	if len(b) < 2 || b[0] != 0x1f || b[1] != 0x8b {
		return b, nil
	}
	zr, err := gzip.NewReader(bytes.NewReader(b))
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	out, err := io.ReadAll(io.LimitReader(zr, limit+1))
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	if int64(len(out)) > limit {
		return nil, fmt.Errorf("%s unpacks to more than the %d bytes a tokenizer file may have", path, limit)
	}
	return out, zr.Close()
}

// clipPattern shortens a pattern for an error message.
func clipPattern(s string) string {
	r := []rune(s)
	if len(r) <= 80 {
		return s
	}
	return string(r[:80]) + "..."
}
