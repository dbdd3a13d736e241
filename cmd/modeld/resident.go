package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"time"

	"github.com/modeld/modeld/cache"
)

// The models loaded when the daemon stops come back when it starts again
// (--restore-models, on by default), so the first request after a restart
// finds its model loaded, as before the restart, and pays neither the
// runner's start nor the model's load; with the prompt cache on disk it then
// pays only the read of its saved prefix. At shutdown, before the models are
// unloaded, serve writes their ids into residentFile in the home, the most
// recently used first; at start, once it listens, it reads and removes the
// file and loads them again in that order in the background, each with the
// keep-alive it had when a request had set one. Requests are served while
// that runs: one for a model being restored waits for its load as it would
// for any load.
//
// A restore never pushes out what it restored: it stops at the first model
// that does not fit beside the ones before it (the memory budget may have
// changed), or that evicted one of them. A model gone from the store, or
// one that fails to load, is logged and skipped. A daemon killed without a
// shutdown writes no file, so a model that brought its runner down at load
// is not loaded again and again.
const residentFile = "resident.json"

// residentMax bounds the models one file names, and residentFileMax its size:
// the file is the daemon's own, but is read as any file under the home is.
const (
	residentMax     = 64
	residentFileMax = 1 << 20
)

// residentRecord is the content of residentFile.
type residentRecord struct {
	Stopped time.Time       `json:"stopped"`
	Models  []residentModel `json:"models"` // the most recently used first
}

// residentModel is one model loaded at the stop.
type residentModel struct {
	ID string `json:"id"`
	// KeepAlive is the keep-alive a request set for it (< 0: keep loaded);
	// nil when it had the configured one, which applies again.
	KeepAlive *time.Duration `json:"keep_alive_ns,omitempty"`
}

// residentModels picks from s the models to load again: the ready ones (busy
// or idle; not those loading, unloading, crashed or not answering), the most
// recently used first, without those that unload as soon as they are idle.
func residentModels(s cache.Snapshot, defaultKeep time.Duration) []residentModel {
	var ready []cache.ModelStatus
	for _, m := range s.Models {
		if m.State == "ready" && m.KeepAlive != 0 {
			ready = append(ready, m)
		}
	}
	// Busy ones (IdleSince zero) count as used now.
	slices.SortStableFunc(ready, func(a, b cache.ModelStatus) int {
		switch {
		case a.IdleSince.IsZero() != b.IdleSince.IsZero():
			if a.IdleSince.IsZero() {
				return -1
			}
			return 1
		default:
			return b.IdleSince.Compare(a.IdleSince)
		}
	})
	out := make([]residentModel, 0, min(len(ready), residentMax))
	for _, m := range ready[:min(len(ready), residentMax)] {
		r := residentModel{ID: m.ID}
		if m.KeepAlive != defaultKeep {
			r.KeepAlive = new(m.KeepAlive)
		}
		out = append(out, r)
	}
	return out
}

// saveResident records the models c holds now for the next start; with none
// it removes an older record.
func (a *app) saveResident(c *cache.Cache) {
	ms := residentModels(c.Snapshot(), a.cfg.KeepAlive)
	if len(ms) == 0 {
		if err := os.Remove(filepath.Join(a.cfg.Home, residentFile)); err != nil && !errors.Is(err, os.ErrNotExist) {
			a.log.Warn("removing the record of loaded models", "err", err)
		}
		return
	}
	if err := writeHomeJSON(a.cfg.Home, residentFile, residentRecord{Stopped: time.Now().UTC(), Models: ms}); err != nil {
		a.log.Warn("recording the loaded models for the next start", "err", err)
		return
	}
	ids := make([]string, len(ms))
	for i, m := range ms {
		ids[i] = m.ID
	}
	a.log.Info("recorded the loaded models for the next start", "models", ids)
}

// takeResident reads and removes home's record of the models loaded at the
// last stop. No record gives none; an unreadable one is an error (and is
// removed too, so it is reported once).
func takeResident(home string) ([]residentModel, error) {
	path := filepath.Join(home, residentFile)
	f, err := os.Open(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	b, rerr := io.ReadAll(io.LimitReader(f, residentFileMax+1))
	f.Close()
	if err := os.Remove(path); err != nil && !errors.Is(err, os.ErrNotExist) {
		return nil, err
	}
	if rerr != nil {
		return nil, rerr
	}
	if len(b) > residentFileMax {
		return nil, fmt.Errorf("%s is over %d bytes", path, residentFileMax)
	}
	var rec residentRecord
	if err := json.Unmarshal(b, &rec); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	if len(rec.Models) > residentMax {
		rec.Models = rec.Models[:residentMax]
	}
	return rec.Models, nil
}

// restoreResident loads the models of the last stop's record again, in its
// order, and logs what it did. It returns when done, or when ctx ends.
func (a *app) restoreResident(ctx context.Context, c *cache.Cache) {
	ms, err := takeResident(a.cfg.Home)
	if err != nil {
		a.log.Warn("the record of the models loaded at the last stop is unreadable; none is loaded again", "err", err)
		return
	}
	if len(ms) == 0 {
		return
	}
	start := time.Now()
	var done []string
	for _, m := range ms {
		if ctx.Err() != nil {
			return
		}
		if slices.Contains(done, m.ID) {
			continue
		}
		t0 := time.Now()
		h, err := c.Acquire(ctx, m.ID, cache.AcquireOptions{KeepAlive: m.KeepAlive})
		if err != nil {
			var tooLarge *cache.TooLargeError
			if errors.As(err, &tooLarge) || errors.Is(err, cache.ErrBusy) {
				a.log.Info("restoring the models loaded at the last stop: no room for the rest", "model", m.ID, "err", err, "restored", done)
				return
			}
			a.log.Warn("restoring a model loaded at the last stop", "model", m.ID, "err", err)
			continue
		}
		h.Release()
		if lost := missing(c.Snapshot(), done); len(lost) > 0 {
			a.log.Info("restoring the models loaded at the last stop: no room for the rest", "model", m.ID, "unloaded", lost)
			return
		}
		done = append(done, m.ID)
		a.log.Info("restored a model loaded at the last stop", "model", m.ID, "took", time.Since(t0).Round(time.Millisecond))
	}
	a.log.Info("restored the models loaded at the last stop", "models", done, "took", time.Since(start).Round(time.Millisecond))
}

// missing returns the ids of want that s does not hold.
func missing(s cache.Snapshot, want []string) []string {
	var out []string
	for _, id := range want {
		if !slices.ContainsFunc(s.Models, func(m cache.ModelStatus) bool { return m.ID == id && m.State != "unloading" }) {
			out = append(out, id)
		}
	}
	return out
}
