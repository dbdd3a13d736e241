package cache

import (
	"errors"
	"fmt"
	"time"
)

var (
	// ErrBusy is wrapped by *BusyError: the request was refused for lack of room.
	ErrBusy = errors.New("model busy")
	// ErrInUse: Unload without waiting found requests in flight.
	ErrInUse = errors.New("model in use")
	// ErrNotLoaded: Unload of a model that is not loaded.
	ErrNotLoaded = errors.New("model not loaded")
	// ErrDied is wrapped by Handle.Err once the instance died under the handle.
	ErrDied = errors.New("model instance died")
	// ErrClosed: the cache is closed.
	ErrClosed = errors.New("model cache closed")
)

// BusyError refuses a request at once: the model's queue is full, or memory is
// held by busy models past Config.MaxWait. It wraps ErrBusy.
type BusyError struct {
	ID         string
	Reason     string
	RetryAfter time.Duration
}

func (e *BusyError) Error() string {
	return fmt.Sprintf("model %q busy: %s; retry after %v", e.ID, e.Reason, e.RetryAfter)
}

func (e *BusyError) Unwrap() error { return ErrBusy }

// CooldownError refuses loading a model whose last load failed recently.
// It wraps the last load error.
type CooldownError struct {
	ID         string
	RetryAfter time.Duration
	Failures   int // failed loads in a row
	Err        error
}

func (e *CooldownError) Error() string {
	return fmt.Sprintf("model %q failed to load %d time(s), retry after %v: %v", e.ID, e.Failures, e.RetryAfter.Round(time.Millisecond), e.Err)
}

func (e *CooldownError) Unwrap() error { return e.Err }

// TooLargeError refuses a model bigger than the whole budget of one memory.
type TooLargeError struct {
	ID     string
	Memory string // "RAM" or "VRAM of cuda:0"
	Size   int64  // estimated bytes
	Budget int64  // bytes
}

func (e *TooLargeError) Error() string {
	return fmt.Sprintf("model %q needs %s of %s but the budget is %s", e.ID, formatBytes(e.Size), e.Memory, formatBytes(e.Budget))
}

// RetryAfter returns how long to wait before retrying, for errors that say so
// (*BusyError, *CooldownError).
func RetryAfter(err error) (time.Duration, bool) {
	var b *BusyError
	if errors.As(err, &b) {
		return b.RetryAfter, true
	}
	var cd *CooldownError
	if errors.As(err, &cd) {
		return cd.RetryAfter, true
	}
	return 0, false
}

// formatBytes writes n in binary units, e.g. "1.5 GiB".
func formatBytes(n int64) string {
	const unit = 1024
	if n < unit && n > -unit {
		return fmt.Sprintf("%d B", n)
	}
	f := float64(n)
	for _, u := range []string{"KiB", "MiB", "GiB", "TiB"} {
		f /= unit
		if f < unit && f > -unit {
			return fmt.Sprintf("%.1f %s", f, u)
		}
	}
	return fmt.Sprintf("%.1f PiB", f/unit)
}
