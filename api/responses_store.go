package api

import (
	"container/list"
	"encoding/json"
	"sort"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/modeld/modeld/backends"
)

// ResponseStoreConfig bounds the store of responses that
// previous_response_id, GET and DELETE /v1/responses/{id} read: it is in
// memory only, holds at most MaxEntries responses and MaxBytes of their
// conversations — counted as held: encoded, with each entry's own cost —
// drops the oldest first, and forgets a response Lifetime after it was
// made. Zero fields take the defaults; MaxBytes < 0 stores
// nothing.
type ResponseStoreConfig struct {
	MaxEntries int
	MaxBytes   int64
	Lifetime   time.Duration
}

// Defaults of the response store.
const (
	DefaultResponseStoreEntries  = 1024
	DefaultResponseStoreBytes    = 64 << 20
	DefaultResponseStoreLifetime = time.Hour
)

// storedResponse is one stored response: its object as GET returns it,
// the conversation through its output (what a continuation is prepended),
// and its input items. The store keeps the conversation and the items
// encoded (conv), so that what it counts is what it holds; get decodes
// them into history and input of a copy.
type storedResponse struct {
	id      string
	made    time.Time
	object  []byte
	conv    []byte
	history []backends.Message
	input   []json.RawMessage
	size    int64
}

// storedConversation is the encoded form of a response's conversation and
// input items.
type storedConversation struct {
	History []backends.Message `json:"h"`
	Input   []json.RawMessage  `json:"i"`
}

// entryOverhead is what one stored response costs besides its encoded
// bytes: the entry, its list element, its map slot and its id, and the
// heap they keep in use around them as older responses are dropped (about
// 0.8 KiB for small responses, measured by
// TestResponseStoreMemoryWithinItsSetting).
const entryOverhead = 1 << 10

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
	return &responseStore{cfg: cfg, byID: map[string]*list.Element{}, order: list.New()}
}

// put stores a finished response with the plan it answered. A response
// larger than the whole store is not stored.
func (s *responseStore) put(r *Response, plan *responsePlan) {
	if s.cfg.MaxBytes < 0 {
		return
	}
	obj, err := json.Marshal(r)
	if err != nil {
		return
	}
	history := append(append([]backends.Message(nil), plan.history...), outputMessages(r)...)
	conv, err := json.Marshal(storedConversation{History: history, Input: plan.input})
	if err != nil {
		return
	}
	// One allocation holds both: fewer, larger objects leave the heap less
	// fragmented as the oldest responses are dropped.
	blob := append(append(make([]byte, 0, len(obj)+len(conv)), obj...), conv...)
	e := &storedResponse{id: r.ID, object: blob[:len(obj):len(obj)], conv: blob[len(obj):]}
	e.size = int64(cap(blob)+len(e.id)) + entryOverhead
	s.mu.Lock()
	defer s.mu.Unlock()
	e.made = time.Now()
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

// get returns the stored response id, unless it has expired: a copy with
// its conversation and input items decoded.
func (s *responseStore) get(id string) (*storedResponse, bool) {
	s.mu.Lock()
	s.expire(time.Now())
	el, ok := s.byID[id]
	var e storedResponse
	if ok {
		e = *el.Value.(*storedResponse)
	}
	s.mu.Unlock()
	if !ok {
		return nil, false
	}
	var c storedConversation
	if err := json.Unmarshal(e.conv, &c); err != nil {
		return nil, false // the store encoded it: cannot happen
	}
	e.history, e.input, e.conv = c.History, c.Input, nil
	return &e, true
}

// delete removes id; false when it was not stored.
func (s *responseStore) delete(id string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.expire(time.Now())
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

// Bounds of a response's metadata, OpenAI's: at most 16 pairs, keys of at
// most 64 characters, values of at most 512. The store keeps metadata with
// the response.
const (
	MaxMetadataPairs = 16
	MaxMetadataKey   = 64
	MaxMetadataValue = 512
)

// checkMetadata refuses metadata over OpenAI's bounds: a 400 on metadata
// that names each key at fault.
func checkMetadata(md map[string]string) error {
	if n := len(md); n > MaxMetadataPairs {
		return tooMany("metadata", n, MaxMetadataPairs, "keys")
	}
	keys := make([]string, 0, len(md))
	for k := range md {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var errs []error
	for _, k := range keys {
		if n := utf8.RuneCountInString(k); n > MaxMetadataKey {
			errs = append(errs, badRequest("metadata", "metadata key %s has %d characters, more than the %d allowed", quote(k), n, MaxMetadataKey))
		} else if n := utf8.RuneCountInString(md[k]); n > MaxMetadataValue {
			errs = append(errs, badRequest("metadata", "metadata[%s] has %d characters, more than the %d allowed", quote(k), n, MaxMetadataValue))
		}
	}
	return joinBadRequests(errs)
}
