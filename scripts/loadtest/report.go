package main

import (
	"fmt"
	"runtime"
	"slices"
	"sort"
	"strings"
	"time"
)

type report struct {
	opts          options
	res           *result
	before, after vitals
	settled       bool
	exit          time.Duration
	exitErr       error
	runnersLeft   int
}

// unintended reports whether o is a failure of the daemon rather than an
// answer the request should get: a 5xx other than 503 with Retry-After, a
// status the kind does not expect, an error event or cut inside a stream, or a
// broken connection.
func unintended(k kind, o outcome) (string, bool) {
	switch {
	case o.cancelled:
		return "", false
	case o.err != nil:
		return "transport error: " + o.err.Error(), true
	case o.status == 503 && !o.retry:
		return "503 without Retry-After", true
	case o.status >= 500 && o.status != 503:
		return fmt.Sprintf("status %d", o.status), true
	case !slices.Contains(k.expect, o.status):
		return fmt.Sprintf("status %d, want one of %v", o.status, k.expect), true
	case o.streamErr != "":
		return "stream: " + o.streamErr, true
	}
	return "", false
}

func percentile(d []time.Duration, p float64) time.Duration {
	if len(d) == 0 {
		return 0
	}
	s := slices.Clone(d)
	slices.Sort(s)
	i := int(p*float64(len(s)-1) + 0.5)
	return s[i]
}

func ms(d time.Duration) string {
	if d == 0 {
		return "–"
	}
	return fmt.Sprintf("%.1f", float64(d.Microseconds())/1000)
}

func mib(b int64) string { return fmt.Sprintf("%.1f MiB", float64(b)/(1<<20)) }

func (r report) counts() (total, bad, fives, retry503 int, failures map[string]int) {
	failures = map[string]int{}
	for _, k := range kinds {
		for _, o := range r.res.byKind[k.name] {
			total++
			if o.status == 503 && o.retry {
				retry503++
			}
			if why, ok := unintended(k, o); ok {
				bad++
				failures[k.name+": "+why]++
				if o.status >= 500 && !(o.status == 503 && o.retry) {
					fives++
				}
			}
		}
	}
	return
}

func (r report) problems() []string {
	var p []string
	_, bad, _, _, failures := r.counts()
	if bad > 0 {
		keys := make([]string, 0, len(failures))
		for k := range failures {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			p = append(p, fmt.Sprintf("unintended outcome (%d×): %s", failures[k], k))
		}
	}
	if !r.settled {
		p = append(p, fmt.Sprintf("goroutines did not come back: %d before the load, %d after", r.before.goroutines, r.after.goroutines))
	}
	if r.exitErr != nil {
		p = append(p, "shutdown: "+r.exitErr.Error())
	}
	if r.runnersLeft > 0 {
		p = append(p, fmt.Sprintf("%d runner processes left after shutdown", r.runnersLeft))
	}
	return p
}

func (r report) markdown() string {
	var b strings.Builder
	total, bad, fives, retry503, _ := r.counts()
	fmt.Fprintf(&b, "## Load test\n\n")
	fmt.Fprintf(&b, "`go run ./scripts/loadtest -requests %d -duration %s -workers %d -doc docs/RELIABILITY.md` (after `make build`), on %d CPUs, %s.\n\n",
		r.opts.requests, r.opts.duration, r.opts.workers, runtime.NumCPU(), time.Now().UTC().Format("2006-01-02"))
	fmt.Fprintf(&b, "One daemon on loopback with an API key, `--queue-size 4 --chat-slots 2 --context-size 512`, a tiny generated GGUF "+
		"(`load/chat`) and the committed ONNX test models (`load/embed`, `load/classify`); %d concurrent clients, %d requests in %.1f s. "+
		"A 503 with Retry-After is the intended answer above the queue limit; every other 5xx, a status the request should not get, "+
		"an error event or a cut inside a stream, or a broken connection counts as unintended.\n\n",
		r.res.workers, total, r.res.elapsed.Seconds())

	fmt.Fprintf(&b, "| request | endpoint | sent | by status | p50 ms | p99 ms | TTFT p50 / p99 ms |\n|---|---|---|---|---|---|---|\n")
	for _, k := range kinds {
		outs := r.res.byKind[k.name]
		statuses := map[string]int{}
		var took, ttft []time.Duration
		for _, o := range outs {
			switch {
			case o.cancelled:
				statuses["left after 3 chunks"]++
			case o.err != nil:
				statuses["error"]++
			default:
				statuses[fmt.Sprint(o.status)]++
			}
			if o.status == 200 && !o.cancelled && o.err == nil {
				took = append(took, o.took)
				if o.ttft > 0 {
					ttft = append(ttft, o.ttft)
				}
			} else if o.status != 0 && o.status != 200 {
				took = append(took, o.took)
			}
		}
		keys := make([]string, 0, len(statuses))
		for s := range statuses {
			keys = append(keys, s)
		}
		sort.Strings(keys)
		var parts []string
		for _, s := range keys {
			parts = append(parts, fmt.Sprintf("%s: %d", s, statuses[s]))
		}
		tt := "–"
		if len(ttft) > 0 {
			tt = ms(percentile(ttft, 0.5)) + " / " + ms(percentile(ttft, 0.99))
		}
		fmt.Fprintf(&b, "| %s | `%s` | %d | %s | %s | %s | %s |\n", k.name, k.endpoint, len(outs), strings.Join(parts, ", "),
			ms(percentile(took, 0.5)), ms(percentile(took, 0.99)), tt)
	}
	fmt.Fprintf(&b, "\n| check | figure |\n|---|---|\n")
	fmt.Fprintf(&b, "| unintended outcomes | %d (unintended 5xx: %d) |\n", bad, fives)
	fmt.Fprintf(&b, "| 503 with Retry-After (above the queue limit) | %d |\n", retry503)
	back := "yes"
	if !r.settled {
		back = "NO"
	}
	fmt.Fprintf(&b, "| daemon goroutines before → after the load | %d → %d (back to level: %s) |\n", r.before.goroutines, r.after.goroutines, back)
	fmt.Fprintf(&b, "| daemon RSS before → after | %s → %s |\n", mib(r.before.rss), mib(r.after.rss))
	fmt.Fprintf(&b, "| runners' RSS before → after | %s → %s |\n", mib(r.before.runnersRSS), mib(r.after.runnersRSS))
	exit := fmt.Sprintf("%.2f s", r.exit.Seconds())
	if r.exitErr != nil {
		exit += " (" + r.exitErr.Error() + ")"
	}
	fmt.Fprintf(&b, "| exit after SIGTERM | %s |\n", exit)
	fmt.Fprintf(&b, "| runner processes after shutdown | %d |\n", r.runnersLeft)
	return b.String()
}
