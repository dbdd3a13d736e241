package main

import (
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/schollz/progressbar/v3"
	"golang.org/x/term"

	"github.com/modeld/modeld/models"
)

// progressPrinter shows pull and import progress: a bar per file (name,
// bytes, rate, ETA) on a terminal, plain lines (every 10%, done) otherwise;
// only for a file that takes time (progressDelay): one that is copied or
// fetched at once shows nothing but the command's summary. The store calls
// it from one goroutine at a time.
type progressPrinter struct {
	w       io.Writer
	tty     bool
	now     func() time.Time
	bar     *progressbar.ProgressBar
	barFile string
	status  string               // last status line printed
	tenths  map[string]int       // plain mode: last 10% step printed per file
	started map[string]time.Time // first byte event per file
	shown   map[string]bool      // files whose progress is shown
}

// progressDelay is how long a file's transfer runs before its progress shows.
const progressDelay = 500 * time.Millisecond

func newProgressPrinter(w io.Writer) *progressPrinter {
	tty := false
	if f, ok := w.(*os.File); ok {
		tty = term.IsTerminal(int(f.Fd()))
	}
	return &progressPrinter{w: w, tty: tty, now: time.Now, tenths: map[string]int{},
		started: map[string]time.Time{}, shown: map[string]bool{}}
}

// takesTime reports whether p's file has been in transfer long enough for
// its progress to show (and from then on, always).
func (pp *progressPrinter) takesTime(p models.Progress) bool {
	if pp.shown[p.File] {
		return true
	}
	now := pp.now()
	start, ok := pp.started[p.File]
	if !ok {
		pp.started[p.File] = now
		return false
	}
	if now.Sub(start) < progressDelay {
		return false
	}
	pp.shown[p.File] = true
	return true
}

// event handles one progress event.
func (pp *progressPrinter) event(p models.Progress) {
	isBytes := p.File != "" && p.Total > 0 && p.Status != models.StatusExists && p.Status != models.StatusVerifying
	if !isBytes {
		pp.finishBar()
		switch {
		case p.Status == models.StatusSuccess:
			return // the command prints its own summary
		case p.Status == models.StatusExists:
			fmt.Fprintf(pp.w, "%s: already in the store (%s)\n", p.File, humanBytes(p.Total))
		case p.Status != pp.status:
			fmt.Fprintln(pp.w, p.Status)
		}
		pp.status = p.Status
		return
	}
	if !pp.takesTime(p) {
		pp.status = p.Status
		return
	}
	if pp.tty {
		if pp.barFile != p.File {
			pp.finishBar()
			pp.barFile = p.File
			pp.bar = progressbar.NewOptions64(p.Total,
				progressbar.OptionSetWriter(pp.w),
				progressbar.OptionSetDescription(shortName(p.File)),
				progressbar.OptionShowBytes(true),
				progressbar.OptionShowCount(),
				progressbar.OptionSetPredictTime(true),
				progressbar.OptionSetWidth(30),
				progressbar.OptionThrottle(100*time.Millisecond),
				progressbar.OptionOnCompletion(func() { fmt.Fprintln(pp.w) }),
			)
		}
		_ = pp.bar.Set64(p.Completed) // rendering errors only affect the display
		pp.status = p.Status
		return
	}
	step := int(p.Completed * 10 / p.Total)
	last, seen := pp.tenths[p.File]
	if !seen || step > last {
		pp.tenths[p.File] = step
		fmt.Fprintf(pp.w, "%s: %3d%% (%s of %s)\n", p.File, step*10, humanBytes(p.Completed), humanBytes(p.Total))
	}
	pp.status = p.Status
}

// finishBar closes the current bar, if any.
func (pp *progressPrinter) finishBar() {
	if pp.bar != nil {
		if !pp.bar.IsFinished() {
			_ = pp.bar.Exit() // display only
			fmt.Fprintln(pp.w)
		}
		pp.bar, pp.barFile = nil, ""
	}
}

// shortName keeps a bar's description readable.
func shortName(p string) string {
	if len(p) <= 40 {
		return p
	}
	return "…" + p[len(p)-39:]
}

// taskList joins tasks for display.
func taskList(ts []models.Task) string {
	s := make([]string, len(ts))
	for i, t := range ts {
		s[i] = string(t)
	}
	return strings.Join(s, ",")
}
