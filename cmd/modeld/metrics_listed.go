package main

import (
	"sync"
	"time"

	"github.com/modeld/modeld/models"
)

// listedTTL is how long the store's list of models is reused between
// metrics scrapes (a picker scrapes every few tens of milliseconds).
const listedTTL = 5 * time.Second

// storeIDs lists the ids of the store's models for the gateway gauges
// (cache.WithListed), reading the store at most once per listedTTL.
type storeIDs struct {
	store *models.Store
	now   func() time.Time

	mu  sync.Mutex // guards ids and at
	ids []string
	at  time.Time
}

func newStoreIDs(store *models.Store) *storeIDs { return &storeIDs{store: store, now: time.Now} }

// list is the cache.WithListed function. A store that cannot be read keeps
// the last list.
func (s *storeIDs) list() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	if now := s.now(); s.at.IsZero() || now.Sub(s.at) >= listedTTL {
		if ms, err := s.store.List(); err == nil {
			ids := make([]string, 0, len(ms)) // a new slice: callers keep the old one
			for _, m := range ms {
				ids = append(ids, m.ID)
			}
			s.ids = ids
		}
		s.at = now
	}
	return s.ids
}
