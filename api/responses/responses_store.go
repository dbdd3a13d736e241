package responses

import (
	"container/list"
	"encoding/json"
	"sort"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/modeld/modeld/api/core"
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

// StoredResponse is one stored response: its object as GET returns it,
// the conversation through its output (what a continuation is prepended),
// and its input items. The store keeps the conversation and the items
// encoded (conv), so that what it counts is what it holds; get decodes
// them into history and input of a copy.
type StoredResponse struct {
	ID      string
	made    time.Time
	object  []byte
	conv    []byte
	History []backends.Message
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

// ResponseStore is the bounded in-memory store. Its mutex guards the map
// and the list (oldest at the front); nothing is called under it.
type ResponseStore struct {
	Cfg   ResponseStoreConfig
	mu    sync.Mutex
	byID  map[string]*list.Element
	order *list.List
	bytes int64
}

func NewResponseStore(cfg ResponseStoreConfig) *ResponseStore {
	if cfg.MaxEntries <= 0 {
		cfg.MaxEntries = DefaultResponseStoreEntries
	}
	if cfg.MaxBytes == 0 {
		cfg.MaxBytes = DefaultResponseStoreBytes
	}
	if cfg.Lifetime <= 0 {
		cfg.Lifetime = DefaultResponseStoreLifetime
	}
	return &ResponseStore{Cfg: cfg, byID: map[string]*list.Element{}, order: list.New()}
}

// Put stores a finished response with the plan it answered. A response
// larger than the whole store is not stored.
func (s *ResponseStore) Put(r *Response, plan *ResponsePlan) {
	if s.Cfg.MaxBytes < 0 {
		return
	}
	obj, err := json.Marshal(r)
	if err != nil {
		return
	}
	history := append(append([]backends.Message(nil), plan.History...), outputMessages(r)...)
	conv, err := json.Marshal(storedConversation{History: history, Input: plan.input})
	if err != nil {
		return
	}
	// One allocation holds both: fewer, larger objects leave the heap less
	// fragmented as the oldest responses are dropped.
	blob := append(append(make([]byte, 0, len(obj)+len(conv)), obj...), conv...)
	e := &StoredResponse{ID: r.ID, object: blob[:len(obj):len(obj)], conv: blob[len(obj):]}
	e.size = int64(cap(blob)+len(e.ID)) + entryOverhead
	s.mu.Lock()
	defer s.mu.Unlock()
	e.made = time.Now()
	s.expire(e.made)
	if e.size > s.Cfg.MaxBytes {
		return
	}
	for s.order.Len() > 0 && (s.order.Len() >= s.Cfg.MaxEntries || s.bytes+e.size > s.Cfg.MaxBytes) {
		s.remove(s.order.Front())
	}
	s.byID[e.ID] = s.order.PushBack(e)
	s.bytes += e.size
}

// Get returns the stored response id, unless it has expired: a copy with
// its conversation and input items decoded.
func (s *ResponseStore) Get(id string) (*StoredResponse, bool) {
	s.mu.Lock()
	s.expire(time.Now())
	el, ok := s.byID[id]
	var e StoredResponse
	if ok {
		e = *el.Value.(*StoredResponse)
	}
	s.mu.Unlock()
	if !ok {
		return nil, false
	}
	var c storedConversation
	if err := json.Unmarshal(e.conv, &c); err != nil {
		return nil, false // the store encoded it: cannot happen
	}
	e.History, e.input, e.conv = c.History, c.Input, nil
	return &e, true
}

// Delete removes id; false when it was not stored.
func (s *ResponseStore) Delete(id string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.expire(time.Now())
	el, ok := s.byID[id]
	if ok {
		s.remove(el)
	}
	return ok
}

// Len is how many responses and bytes the store holds.
func (s *ResponseStore) Len() (int, int64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.order.Len(), s.bytes
}

// expire drops the responses made a lifetime or more before now (the
// oldest are at the front). s.mu is held.
func (s *ResponseStore) expire(now time.Time) {
	for el := s.order.Front(); el != nil; el = s.order.Front() {
		if now.Sub(el.Value.(*StoredResponse).made) < s.Cfg.Lifetime {
			return
		}
		s.remove(el)
	}
}

// remove drops one entry. s.mu is held.
func (s *ResponseStore) remove(el *list.Element) {
	e := s.order.Remove(el).(*StoredResponse)
	delete(s.byID, e.ID)
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
		return core.TooMany("metadata", n, MaxMetadataPairs, "keys")
	}
	keys := make([]string, 0, len(md))
	for k := range md {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var errs []error
	for _, k := range keys {
		if n := utf8.RuneCountInString(k); n > MaxMetadataKey {
			errs = append(errs, core.BadRequest("metadata", "metadata key %s has %d characters, more than the %d allowed", core.Quote(k), n, MaxMetadataKey))
		} else if n := utf8.RuneCountInString(md[k]); n > MaxMetadataValue {
			errs = append(errs, core.BadRequest("metadata", "metadata[%s] has %d characters, more than the %d allowed", core.Quote(k), n, MaxMetadataValue))
		}
	}
	return core.JoinBadRequests(errs)
}
