// Package cache owns the loaded model instances of modeld: one instance per model id,
// shared between requests through reference-counted handles. It loads on first use
// (one load in flight per id, failures not cached but cooled down), unloads what has
// been idle past its keep-alive, keeps the loaded set inside a memory budget by
// evicting the least recently used idle instances, bounds the requests waiting on each
// instance, drops instances that report they died, and refuses at once the
// requests of an instance that reports it does not answer (Ailing).
//
// Every id that enters (Acquire, Unload) is first put in its canonical form by
// models.Canonical, so "m" and "m:latest" share one instance, one queue and one
// line of Snapshot, and an id the store would refuse is refused here too.
//
// It must not know how a model is loaded or where it is stored: the Resolver (id to
// Spec) and the Loader (Spec to Instance) are injected, so every rule here is tested
// with fakes; its clock is the time package, which the tests drive with testing/synctest. It calls no native code and reads no configuration itself.
//
// Lock order: Cache.mu is the only lock of the package and guards every field of the
// Cache and of its entries and waiters. While holding it the cache calls only the
// time package (Now, AfterFunc, Timer.Stop) and prometheus metrics, neither of which calls
// back into the cache synchronously. Resolver, Loader and every Instance method are
// called without it. Events travel on channels: a waiter's ch, an entry's loaded and
// gone, and the broadcast channel returned by watchLocked.
package cache

import (
	"container/list"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/modeld/modeld/models"
)

// DefaultKeepAlive is how long an idle instance stays loaded unless configured otherwise.
const DefaultKeepAlive = 5 * time.Minute

// Spec is what the cache knows about a model before loading it. The Resolver fills it.
type Spec struct {
	ID       string  // model id, as requested
	Task     string  // chat, embed, classify, summarize, rerank
	Backend  string  // backend name, e.g. "llama" or "onnx"
	Device   string  // "cpu", or a GPU id such as "cuda:0" (keys of Config.VRAM)
	GPUShare float64 // estimated fraction of layers placed on the GPU, 0..1
	RAM      int64   // estimated bytes of RAM: file size plus context/KV size
	VRAM     int64   // estimated bytes of VRAM on Device
	Data     any     // opaque to the cache: passed from the Resolver to the Loader
	// Estimate is how RAM and VRAM were estimated (weights, KV, compute...),
	// opaque to the cache and shown as is in ModelStatus.
	Estimate any
	// Context is the tokens one sequence of a chat model holds, as the
	// Resolver chose it (0: not a chat model); shown in ModelStatus.
	Context int
}

// Instance is a loaded model, as returned by a Loader.
type Instance interface {
	Close() error // unloads: frees memory, stops the runner process
	// Size is the bytes of RAM the instance holds, read once right after
	// the load; <= 0 keeps the estimate.
	Size() int64
	Slots() int // requests it serves in parallel; <= 0 means 1
}

// Mortal is implemented by instances that can die on their own (a runner process
// that exits). Done is closed when that happens; Err then says why.
type Mortal interface {
	Done() <-chan struct{}
	Err() error
}

// Placed is implemented by instances that know where they ended up after load.
type Placed interface {
	Placement() Placement
}

// Placement is where a loaded instance really runs. Device "" keeps the
// Spec's device. VRAM is a measurement of its VRAM (or a better estimate);
// <= 0 keeps the Spec's estimate, except on the CPU, where VRAM is 0.
type Placement struct {
	Device   string
	GPUShare float64
	VRAM     int64
}

// Resolver turns a model id into a Spec (from the model store and the probe).
type Resolver func(ctx context.Context, id string) (Spec, error)

// Loader loads a model. Its ctx is cancelled only when the cache closes.
type Loader func(ctx context.Context, spec Spec) (Instance, error)

// Config holds the limits of the cache. Zero values are literal (0 RAM = no limit,
// 0 QueueLen = no queue); DefaultConfig gives the documented defaults.
type Config struct {
	RAM          int64            // bytes of RAM loaded models may use; 0 = no limit
	VRAM         map[string]int64 // bytes per GPU id ("cuda:0"); a GPU absent here is not limited
	MaxLoaded    int              // most instances loaded at once; 0 = no limit
	KeepAlive    time.Duration    // idle time before unload; 0 = at once; < 0 = never
	QueueLen     int              // requests that may wait per instance when its slots are busy
	MaxWait      time.Duration    // how long a load waits for memory held by busy instances
	RetryAfter   time.Duration    // hint given with busy refusals
	CooldownBase time.Duration    // refusal time after a failed load, doubled per further failure
	CooldownMax  time.Duration    // cap of that refusal time
}

// DefaultConfig returns the defaults: no memory limit, 5m keep-alive, 512 queued
// requests per model, 30s wait for memory, 1s..1m cooldown.
func DefaultConfig() Config {
	return Config{
		KeepAlive:    DefaultKeepAlive,
		QueueLen:     512,
		MaxWait:      30 * time.Second,
		RetryAfter:   time.Second,
		CooldownBase: time.Second,
		CooldownMax:  time.Minute,
	}
}

func (cfg Config) validate() error {
	var errs []error
	if cfg.RAM < 0 {
		errs = append(errs, fmt.Errorf("RAM budget %d is negative", cfg.RAM))
	}
	for dev, n := range cfg.VRAM {
		if n <= 0 {
			errs = append(errs, fmt.Errorf("VRAM budget of %s is %d, want > 0", dev, n))
		}
	}
	if cfg.MaxLoaded < 0 {
		errs = append(errs, fmt.Errorf("max loaded models %d is negative", cfg.MaxLoaded))
	}
	if cfg.QueueLen < 0 {
		errs = append(errs, fmt.Errorf("queue length %d is negative", cfg.QueueLen))
	}
	if cfg.MaxWait < 0 || cfg.RetryAfter < 0 || cfg.CooldownBase < 0 || cfg.CooldownMax < 0 {
		errs = append(errs, errors.New("max wait, retry-after and cooldown durations must not be negative"))
	}
	if cfg.CooldownMax < cfg.CooldownBase {
		errs = append(errs, fmt.Errorf("cooldown max %v is below cooldown base %v", cfg.CooldownMax, cfg.CooldownBase))
	}
	return errors.Join(errs...)
}

// Option changes how a Cache is built.
type Option func(*Cache)

// WithLogger sets the logger (default slog.Default()).
func WithLogger(l *slog.Logger) Option { return func(c *Cache) { c.log = l } }

// WithListed gives the ids of the models that could be loaded (the store's):
// the gateway gauges show each at 0 while it is not loaded, so a router
// that reads one model's series finds it on every host that may serve it.
// list is called once per metrics scrape, without the cache's lock.
func WithListed(list func() []string) Option { return func(c *Cache) { c.listed = list } }

// AcquireOptions are per-request settings.
type AcquireOptions struct {
	// KeepAlive, when set, replaces the model's keep-alive from this request on:
	// 0 = unload as soon as idle, < 0 = keep loaded. nil = the configured default.
	KeepAlive *time.Duration
}

// Cache holds the loaded instances. Its methods are safe for concurrent use.
type Cache struct {
	cfg     Config
	resolve Resolver
	load    Loader
	log     *slog.Logger
	m       *metrics
	ctx     context.Context // cancelled by Close; given to Resolver and Loader
	cancel  context.CancelFunc

	mu       sync.Mutex
	closed   bool
	entries  map[string]*entry   // live instances (loading or ready) by id
	retiring map[*entry]struct{} // out of entries, not yet closed
	failures map[string]*failure // load failures by id, for the cooldown
	used     usage               // budget held by live and retiring instances
	freeing  usage               // part of used held by retiring instances
	tick     uint64              // use counter for LRU order
	running  int                 // goroutines started by the cache, still running
	changed  chan struct{}       // closed and cleared on any state change; nil if nobody watches
	gw       gatewayState        // what the gateway gauges showed (gateway.go)
	listed   func() []string     // WithListed; nil = none; called without mu
}

// entry is one instance of one model id, from the start of its load to its close.
type entry struct {
	id       string
	spec     Spec
	loading  bool
	loaded   chan struct{} // closed when the load finished, either way
	inst     Instance
	reserved bool // its ram/vram/count are in Cache.used
	ram      int64
	vram     int64
	device   string
	share    float64
	slots    int
	inUse    int
	queue    list.List // of *waiter, FIFO
	keep     time.Duration
	lastUse  uint64
	idle     time.Time // when inUse last dropped to 0
	loadedAt time.Time
	timerGen uint64    // invalidates keep-alive timers that fired late
	timerAt  time.Time // when the armed keep-alive timer fires; zero if none
	timer    *time.Timer
	retired  bool
	closing  bool
	stop     chan struct{} // closed on retire: stops the death watcher
	gone     chan struct{} // closed once Close returned and the budget is back
	died     error
	ailing   error // set while the instance reports it does not answer (Ailing)
	requests prometheus.Counter
}

type waiter struct {
	elem *list.Element // nil once decided
	ch   chan struct{} // closed when decided
	err  error         // nil: a slot was granted
}

// errRetry tells a waiter that its entry went away and Acquire should start over.
var errRetry = errors.New("cache: entry retired, retry")

// New builds a cache. resolve and load must not be nil.
func New(cfg Config, resolve Resolver, load Loader, opts ...Option) (*Cache, error) {
	if err := cfg.validate(); err != nil {
		return nil, fmt.Errorf("cache config: %w", err)
	}
	if resolve == nil || load == nil {
		return nil, errors.New("cache: resolver and loader are required")
	}
	c := &Cache{
		cfg:      cfg,
		resolve:  resolve,
		load:     load,
		log:      slog.Default(),
		m:        newMetrics(),
		entries:  make(map[string]*entry),
		retiring: make(map[*entry]struct{}),
		failures: make(map[string]*failure),
		used:     usage{vram: make(map[string]int64)},
		freeing:  usage{vram: make(map[string]int64)},
	}
	for _, o := range opts {
		o(c)
	}
	c.ctx, c.cancel = context.WithCancel(context.Background())
	return c, nil
}

// Handle is one request's share of an instance. Release it exactly once when done
// (further calls do nothing).
type Handle struct {
	c        *Cache
	e        *entry
	released atomic.Bool
}

// Instance returns the loaded model.
func (h *Handle) Instance() Instance { return h.e.inst }

// Err is non-nil once the instance died while the handle was held; the error
// wraps ErrDied and the instance's own reason.
func (h *Handle) Err() error {
	h.c.mu.Lock()
	defer h.c.mu.Unlock()
	return h.e.died
}

// Release gives the slot back.
func (h *Handle) Release() {
	if !h.released.CompareAndSwap(false, true) {
		return
	}
	h.c.mu.Lock()
	h.c.releaseLocked(h.e)
	h.c.mu.Unlock()
}

// Acquire returns a handle on the instance of model id, loading it if needed.
// Errors: *CooldownError, *BusyError (wrapping ErrBusy), *TooLargeError, ErrClosed,
// an error wrapping ErrUnresponsive and the instance's own (Ailing),
// models.ErrInvalidID, the Resolver's and the Loader's errors (wrapped), and ctx's
// error. The Resolver is called with the canonical id.
func (c *Cache) Acquire(ctx context.Context, id string, opts AcquireOptions) (*Handle, error) {
	id, err := models.Canonical(id)
	if err != nil {
		return nil, err
	}
	for {
		c.mu.Lock()
		if c.closed {
			c.mu.Unlock()
			return nil, ErrClosed
		}
		e := c.entries[id]
		if e != nil && c.diedLocked(e) {
			e = nil // retired: this request loads it again
		}
		if e != nil && e.ailing != nil {
			err, a := e.ailing, e.inst.(Ailing)
			c.mu.Unlock()
			return nil, freshUnresponsive(e.id, a, err)
		}
		if e == nil {
			if err := c.cooldownLocked(id); err != nil {
				c.mu.Unlock()
				return nil, err
			}
			e = c.startLoadLocked(id)
		}
		if !e.loading && e.inUse < e.slots && e.queue.Len() == 0 {
			c.setKeepLocked(e, opts)
			c.grantLocked(e)
			c.mu.Unlock()
			return &Handle{c: c, e: e}, nil
		}
		limit := c.cfg.QueueLen
		if e.loading {
			limit++ // the first waiter of a load will hold a slot
		}
		if e.queue.Len() >= limit {
			c.m.busy.WithLabelValues("queue_full").Inc()
			c.mu.Unlock()
			return nil, &BusyError{ID: id, Reason: fmt.Sprintf("queue full (%d waiting)", e.queue.Len()), RetryAfter: c.cfg.RetryAfter}
		}
		c.setKeepLocked(e, opts)
		w := &waiter{ch: make(chan struct{})}
		w.elem = e.queue.PushBack(w)
		c.m.queue.Inc()
		c.notifyLocked()
		c.mu.Unlock()

		err := c.wait(ctx, e, w)
		if err == errRetry {
			continue
		}
		if err != nil {
			return nil, err
		}
		return &Handle{c: c, e: e}, nil
	}
}

// wait blocks until w is decided or ctx is done; on ctx it leaves the queue or
// gives back a slot granted in the meantime.
func (c *Cache) wait(ctx context.Context, e *entry, w *waiter) error {
	select {
	case <-w.ch:
		return w.err
	case <-ctx.Done():
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if w.elem != nil {
		e.queue.Remove(w.elem)
		w.elem = nil
		c.m.queue.Dec()
		c.notifyLocked()
	} else if w.err == nil {
		c.releaseLocked(e)
	}
	return fmt.Errorf("waiting for model %q: %w", e.id, ctx.Err())
}

// decideLocked answers the waiter at the front of e's queue.
func (c *Cache) decideLocked(e *entry, err error) {
	w := e.queue.Remove(e.queue.Front()).(*waiter)
	w.elem = nil
	w.err = err
	c.m.queue.Dec()
	if err == nil {
		c.grantLocked(e)
	}
	close(w.ch)
}

func (c *Cache) grantLocked(e *entry) {
	e.inUse++
	c.tick++
	e.lastUse = c.tick
	e.requests.Inc()
}

func (c *Cache) setKeepLocked(e *entry, opts AcquireOptions) {
	e.keep = c.cfg.KeepAlive
	if opts.KeepAlive != nil {
		e.keep = *opts.KeepAlive
	}
}

func (c *Cache) releaseLocked(e *entry) {
	e.inUse--
	c.notifyLocked()
	switch {
	case e.retired:
		if e.inUse == 0 {
			c.startCloseLocked(e)
		}
	case e.queue.Len() > 0:
		c.decideLocked(e, nil)
	case e.inUse == 0:
		c.idleLocked(e)
	}
}
