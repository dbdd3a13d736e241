package api

import (
	"container/list"
	"encoding/json"
	"sync"
	"time"

	"github.com/modeld/modeld/backends"
)

// ResponseStoreConfig bounds the store of responses that
// previous_response_id, GET and DELETE /v1/responses/{id} read: it is in
// memory only, holds at most MaxEntries responses and MaxBytes of their
// conversations, drops the oldest first, and forgets a response Lifetime
// after it was made. Zero fields take the defaults; MaxBytes < 0 stores
// nothing.
type ResponseStoreConfig struct {
	MaxEntries int
	MaxBytes   int64
	Lifetime   time.Duration
	// Now is the clock (nil: time.Now), for tests.
	Now func() time.Time
}

// Defaults of the response store.
const (
	DefaultResponseStoreEntries  = 1024
	DefaultResponseStoreBytes    = 64 << 20
	DefaultResponseStoreLifetime = time.Hour
)

// storedResponse is one stored response: its object as GET returns it,
// the conversation through its output (what a continuation is prepended),
// and its input items.
type storedResponse struct {
	id      string
	made    time.Time
	object  []byte
	history []backends.Message
	input   []json.RawMessage
	size    int64
}

// responseStore is the bounded in-memory store. Its mutex guards the map
// and the list (oldest at the front); nothing is called under it.
type responseStore struct {
	cfg   ResponseStoreConfig
	mu    sync.Mutex
	byID  map[string]*list.Element
	order *list.List
	bytes int64
}

func newResponseStore(cfg ResponseStoreConfig) *responseStore {
	if cfg.MaxEntries <= 0 {
		cfg.MaxEntries = DefaultResponseStoreEntries
	}
	if cfg.MaxBytes == 0 {
		cfg.MaxBytes = DefaultResponseStoreBytes
	}
	if cfg.Lifetime <= 0 {
		cfg.Lifetime = DefaultResponseStoreLifetime
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	return &responseStore{cfg: cfg, byID: map[string]*list.Element{}, order: list.New()}
}

// put stores a finished response with the plan it answered. A response
// larger than the whole store is not stored.
func (s *responseStore) put(r *Response, plan *responsePlan) {
	obj, err := json.Marshal(r)
	if err != nil {
		return
	}
	e := &storedResponse{id: r.ID, object: obj, input: plan.input,
		history: append(append([]backends.Message(nil), plan.history...), outputMessages(r)...)}
	e.size = int64(len(obj))
	for _, m := range e.history {
		e.size += int64(len(m.Role) + len(m.Content) + len(m.Name) + len(m.ToolCallID))
		for _, tc := range m.ToolCalls {
			e.size += int64(len(tc.ID) + len(tc.Name) + len(tc.Arguments))
		}
	}
	for _, it := range e.input {
		e.size += int64(len(it))
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	e.made = s.cfg.Now()
	s.expire(e.made)
	if e.size > s.cfg.MaxBytes {
		return
	}
	for s.order.Len() > 0 && (s.order.Len() >= s.cfg.MaxEntries || s.bytes+e.size > s.cfg.MaxBytes) {
		s.remove(s.order.Front())
	}
	s.byID[e.id] = s.order.PushBack(e)
	s.bytes += e.size
}

// get returns the stored response id, unless it has expired.
func (s *responseStore) get(id string) (*storedResponse, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.expire(s.cfg.Now())
	el, ok := s.byID[id]
	if !ok {
		return nil, false
	}
	return el.Value.(*storedResponse), true
}

// delete removes id; false when it was not stored.
func (s *responseStore) delete(id string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.expire(s.cfg.Now())
	el, ok := s.byID[id]
	if ok {
		s.remove(el)
	}
	return ok
}

// len is how many responses and bytes the store holds.
func (s *responseStore) len() (int, int64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.order.Len(), s.bytes
}

// expire drops the responses made a lifetime or more before now (the
// oldest are at the front). s.mu is held.
func (s *responseStore) expire(now time.Time) {
	for el := s.order.Front(); el != nil; el = s.order.Front() {
		if now.Sub(el.Value.(*storedResponse).made) < s.cfg.Lifetime {
			return
		}
		s.remove(el)
	}
}

// remove drops one entry. s.mu is held.
func (s *responseStore) remove(el *list.Element) {
	e := s.order.Remove(el).(*storedResponse)
	delete(s.byID, e.id)
	s.bytes -= e.size
}
