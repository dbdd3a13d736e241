package main

import (
	"log/slog"
	"time"

	"github.com/modeld/modeld/internal/lograte"
)

// A picker that scrapes /metrics without the key (no --metrics-without-key)
// is refused many times a second, and so is a stranger who repeats the
// scrape: the lines api writes for those refusals ("request refused", path
// /metrics) are limited to refusedScrapeBurst at once and then one per
// refusedScrapeEvery per refusal code, each saying how many it stands for.
// Every other line passes.
const (
	refusedScrapeBurst = 5
	refusedScrapeEvery = 10 * time.Second
)

// refusedScrapeLog is the logger given to api: log, with its refused
// /metrics scrapes limited.
func refusedScrapeLog(log *slog.Logger) *slog.Logger {
	lim := lograte.NewLimiter(refusedScrapeBurst, refusedScrapeEvery)
	return slog.New(lograte.NewHandler(log.Handler(), lim, refusedScrape))
}

// refusedScrape matches api's line for a refused request to /metrics, keyed
// by the refusal's code.
func refusedScrape(r slog.Record) (key string, limited bool) {
	if r.Message != "request refused" {
		return "", false
	}
	if p, ok := lograte.Attr(r, "path"); !ok || p.String() != "/metrics" {
		return "", false
	}
	code, _ := lograte.Attr(r, "code")
	return code.String(), true
}
