package cache

import (
	"errors"
	"fmt"
	"time"
)

// reason says why an instance was unloaded (label of the evictions metric).
type reason string

const (
	reasonBudget    reason = "budget"     // LRU eviction to make room for a load
	reasonKeepAlive reason = "keep_alive" // idle past its keep-alive
	reasonUnload    reason = "unload"     // explicit Unload
	reasonCrash     reason = "crash"      // the instance reported it died
	reasonShutdown  reason = "shutdown"   // Close
)

// usage is budget held: bytes of RAM, bytes of VRAM per GPU id, instance count.
type usage struct {
	ram   int64
	vram  map[string]int64
	count int
}

func (u *usage) add(e *entry, sign int) {
	u.ram += int64(sign) * e.ram
	if e.vram != 0 {
		u.vram[e.device] += int64(sign) * e.vram
	}
	u.count += sign
}

type failure struct {
	n     int       // failures in a row
	until time.Time // refuse loads before this
	err   error     // the last one
}

// startLoadLocked creates the entry of id and starts its load.
func (c *Cache) startLoadLocked(id string) *entry {
	e := &entry{
		id:      id,
		loading: true,
		loaded:  make(chan struct{}),
		stop:    make(chan struct{}),
		gone:    make(chan struct{}),
	}
	c.entries[id] = e
	c.goLocked(func() { c.loadEntry(e) })
	return e
}

// loadEntry resolves, reserves budget and loads e, then hands the instance to
// the waiters or gives every waiter the error.
func (c *Cache) loadEntry(e *entry) {
	inst, resolved, loadFailed, err := c.resolveAndLoad(e)
	var sz int64
	slots := 1
	var place *Placement
	if err == nil {
		sz, slots = inst.Size(), inst.Slots()
		if p, ok := inst.(Placed); ok {
			pl := p.Placement()
			place = &pl
		}
	}

	c.mu.Lock()
	defer c.mu.Unlock()
	e.loading = false
	close(e.loaded)
	if err == nil && c.closed {
		err = ErrClosed
		c.goLocked(func() { c.closeQuietly(e.id, inst) })
	}
	if err != nil {
		// Only ids that resolved (a model of the store) get their own
		// series: any number of unknown ids are one, model="".
		label := ""
		if resolved {
			label = e.id
		}
		c.m.loads.WithLabelValues(label, "error").Inc()
		if e.reserved {
			c.used.add(e, -1)
		}
		if c.entries[e.id] == e {
			delete(c.entries, e.id)
		}
		if loadFailed {
			c.failLocked(e.id, err)
		}
		for e.queue.Len() > 0 {
			c.decideLocked(e, err)
		}
		c.log.Warn("loading model failed", "id", e.id, "err", err)
		c.notifyLocked()
		return
	}
	c.m.loads.WithLabelValues(e.id, "ok").Inc()
	delete(c.failures, e.id)
	e.inst = inst
	e.requests = c.m.requests.WithLabelValues(e.id) // only ids that loaded get a series
	c.used.add(e, -1)                               // replace the estimate by what the instance reports
	if sz > 0 {
		e.ram = sz
	}
	if place != nil {
		if place.Device != "" {
			e.device = place.Device
		}
		e.share = place.GPUShare
		switch {
		case e.device == "cpu":
			e.vram, e.share = 0, 0 // a GPU load that fell back holds no VRAM
		case place.VRAM > 0:
			e.vram = place.VRAM
		}
	}
	c.used.add(e, 1)
	e.slots = max(slots, 1)
	e.loadedAt = time.Now()
	c.log.Info("model loaded", "id", e.id, "device", e.device, "bytes", e.ram, "vram_bytes", e.vram, "slots", e.slots,
		"ram_used", c.used.ram, "vram_used", c.used.vram[e.device])
	for e.queue.Len() > 0 && e.inUse < e.slots {
		c.decideLocked(e, nil)
	}
	if m, ok := inst.(Mortal); ok {
		c.goLocked(func() { c.watchDeath(e, m) })
	}
	if a, ok := inst.(Ailing); ok {
		c.goLocked(func() { c.watchHealth(e, a) })
	}
	if e.inUse == 0 {
		c.idleLocked(e)
	}
	c.notifyLocked()
}

// resolveAndLoad runs outside the lock. resolved is true once the id named a
// model (its metrics series are bounded by the store); loadFailed is true
// when the Loader itself failed, which starts the cooldown.
func (c *Cache) resolveAndLoad(e *entry) (inst Instance, resolved, loadFailed bool, err error) {
	spec, err := c.resolve(c.ctx, e.id)
	if err != nil {
		return nil, false, false, fmt.Errorf("model %q: %w", e.id, err)
	}
	spec.ID = e.id
	if err := c.tooLarge(spec); err != nil {
		return nil, true, false, err
	}
	if err := c.reserve(e, spec); err != nil {
		return nil, true, false, err
	}
	start := time.Now()
	inst, err = c.load(c.ctx, spec)
	c.m.loadSeconds.Observe(time.Now().Sub(start).Seconds())
	if err != nil {
		if c.ctx.Err() != nil {
			return nil, true, false, fmt.Errorf("load model %q: %w (%w)", e.id, ErrClosed, err)
		}
		return nil, true, true, fmt.Errorf("load model %q: %w", e.id, err)
	}
	if inst == nil {
		return nil, true, true, fmt.Errorf("load model %q: loader returned no instance", e.id)
	}
	return inst, true, false, nil
}

func (c *Cache) tooLarge(s Spec) error {
	if c.cfg.RAM > 0 && s.RAM > c.cfg.RAM {
		return &TooLargeError{ID: s.ID, Memory: "RAM", Size: s.RAM, Budget: c.cfg.RAM}
	}
	if limit, ok := c.cfg.VRAM[s.Device]; ok && s.VRAM > limit {
		return &TooLargeError{ID: s.ID, Memory: "VRAM of " + s.Device, Size: s.VRAM, Budget: limit}
	}
	return nil
}

// reserve accounts s's estimate in the budget, evicting least recently used idle
// instances to make room, and waits (up to MaxWait) while busy ones hold it.
func (c *Cache) reserve(e *entry, s Spec) error {
	var expired chan struct{} // closed after MaxWait; made at the first wait
	var t *time.Timer
	defer func() {
		if t != nil {
			t.Stop()
		}
	}()

	c.mu.Lock()
	defer c.mu.Unlock()
	e.spec = s
	e.ram, e.vram, e.device, e.share = s.RAM, s.VRAM, s.Device, s.GPUShare
	for {
		if c.closed {
			return ErrClosed
		}
		if c.fitsLocked(s, c.used) {
			c.used.add(e, 1)
			e.reserved = true
			return nil
		}
		for {
			after := c.used
			after.ram -= c.freeing.ram
			after.count -= c.freeing.count
			after.vram = map[string]int64{s.Device: c.used.vram[s.Device] - c.freeing.vram[s.Device]}
			if c.fitsLocked(s, after) {
				break // enough is being freed already
			}
			v := c.victimLocked(s, after)
			if v == nil {
				break
			}
			c.retireLocked(v, reasonBudget)
		}
		if expired == nil {
			expired = make(chan struct{})
			t = time.AfterFunc(c.cfg.MaxWait, func() { close(expired) })
		}
		ch := c.watchLocked()
		c.mu.Unlock()
		select {
		case <-ch:
			c.mu.Lock()
		case <-expired:
			c.mu.Lock()
			if c.fitsLocked(s, c.used) {
				continue
			}
			c.m.busy.WithLabelValues("memory").Inc()
			return &BusyError{ID: s.ID, Reason: fmt.Sprintf("not enough memory: loaded models are busy (waited %v)", c.cfg.MaxWait), RetryAfter: c.cfg.RetryAfter}
		case <-c.ctx.Done():
			c.mu.Lock()
		}
	}
}

func (c *Cache) fitsLocked(s Spec, u usage) bool {
	if c.cfg.RAM > 0 && u.ram+s.RAM > c.cfg.RAM {
		return false
	}
	if limit, ok := c.cfg.VRAM[s.Device]; ok && u.vram[s.Device]+s.VRAM > limit {
		return false
	}
	return c.cfg.MaxLoaded == 0 || u.count+1 <= c.cfg.MaxLoaded
}

// victimLocked picks the least recently used idle instance whose unloading helps
// the constraint s does not fit under u.
func (c *Cache) victimLocked(s Spec, u usage) *entry {
	ramShort := c.cfg.RAM > 0 && u.ram+s.RAM > c.cfg.RAM
	limit, ok := c.cfg.VRAM[s.Device]
	vramShort := ok && u.vram[s.Device]+s.VRAM > limit
	countShort := c.cfg.MaxLoaded > 0 && u.count+1 > c.cfg.MaxLoaded
	var best *entry
	for _, v := range c.entries {
		if v.loading || v.inUse > 0 || v.queue.Len() > 0 {
			continue
		}
		helps := countShort || (ramShort && v.ram > 0) || (vramShort && v.device == s.Device && v.vram > 0)
		if helps && (best == nil || v.lastUse < best.lastUse) {
			best = v
		}
	}
	return best
}

// failLocked records a failed load and starts (or lengthens) the cooldown of id.
func (c *Cache) failLocked(id string, err error) {
	f := c.failures[id]
	if f == nil {
		f = &failure{}
		c.failures[id] = f
	}
	f.n++
	d := c.cfg.CooldownBase
	for i := 1; i < f.n && d < c.cfg.CooldownMax; i++ {
		d *= 2
	}
	d = min(d, c.cfg.CooldownMax)
	f.until = time.Now().Add(d)
	f.err = err
}

func (c *Cache) cooldownLocked(id string) error {
	f := c.failures[id]
	if f == nil {
		return nil
	}
	if left := f.until.Sub(time.Now()); left > 0 {
		c.m.busy.WithLabelValues("cooldown").Inc()
		return &CooldownError{ID: id, RetryAfter: left, Failures: f.n, Err: f.err}
	}
	return nil
}

// watchDeath drops e when its instance reports it died.
func (c *Cache) watchDeath(e *entry, m Mortal) {
	select {
	case <-m.Done():
	case <-e.stop:
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.diedLocked(e)
}

// diedLocked reports whether e's instance has died, and retires e if so and
// that was not handled yet: an acquire that comes before watchDeath runs must
// not be handed the dead instance.
func (c *Cache) diedLocked(e *entry) bool {
	if e.loading || e.retired {
		return false
	}
	m, ok := e.inst.(Mortal)
	if !ok {
		return false
	}
	select {
	case <-m.Done():
	default:
		return false
	}
	cause := m.Err()
	if cause == nil {
		cause = errors.New("no reason given")
	}
	e.died = fmt.Errorf("model %q: %w: %w", e.id, ErrDied, cause)
	c.log.Error("model instance died", "id", e.id, "err", cause, "in_flight", e.inUse)
	c.retireLocked(e, reasonCrash)
	return true
}

func (c *Cache) closeQuietly(id string, inst Instance) {
	if err := inst.Close(); err != nil {
		c.log.Warn("closing model", "id", id, "err", err)
	}
}
