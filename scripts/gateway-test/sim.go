package gatewaytest

import (
	"bytes"
	"container/heap"
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"time"

	fwkdl "sigs.k8s.io/gateway-api-inference-extension/pkg/epp/framework/interface/datalayer"
)

// The load model: an agent workload replayed over simulated modeld hosts,
// each request routed by the picker's real scheduler (or its random picker)
// on the gauges the hosts would export. A host is what modeld is: a few
// models loaded at once (max_lora), each with Slots sequences that keep the
// KV of their last request for reuse, a FIFO of requests waiting for a slot
// or a load, and a load that takes LoadTime and evicts the least recently
// used idle model.

// Workload is a generated agent trace: Users agents, each a conversation of
// Turns requests to one model drawn from Models by a Zipf popularity; every
// model's agents share its system prompt, and each turn resends the
// conversation so far.
type Workload struct {
	Users, Turns, Models int
	Zipf                 float64       // popularity exponent (> 1)
	SystemTokens         int           // the shared system prompt and tools
	TurnTokens           int           // what each turn adds (tool output, user text)
	OutputTokens         int           // each answer
	Think                time.Duration // between an answer and the next turn
	Seed                 uint64
}

// HostModel is one simulated modeld host.
type HostModel struct {
	MaxModels     int           // models loaded at once (memory)
	Slots         int           // sequences per loaded model (--chat-slots)
	KeptPerModel  int           // conversations whose KV the slots keep
	LoadTime      time.Duration // one model load
	PrefillPerSec float64       // prompt tokens evaluated per second, per sequence
	DecodePerSec  float64       // tokens generated per second, per sequence
}

// Result is what one run measured.
type Result struct {
	Requests            int
	QueueMean, QueueP95 time.Duration // arrival to first prompt token: slot waits and loads
	CacheHit            float64       // prompt tokens read from kept KV over prompt tokens
	Loads               int
}

func (r Result) String() string {
	return fmt.Sprintf("queue mean %6.2fs p95 %6.2fs, cache hit %5.1f%%, %4d loads",
		r.QueueMean.Seconds(), r.QueueP95.Seconds(), 100*r.CacheHit, r.Loads)
}

// NoAffinity is config without the LoRA-affinity scorer.
func NoAffinity(config []byte) []byte {
	return bytes.Replace(config, []byte("  - pluginRef: lora-affinity-scorer\n    weight: 10\n"), nil, 1)
}

// RandomConfig routes each request to a host drawn at random, with the
// picker's random picker.
var RandomConfig = []byte(`apiVersion: inference.networking.x-k8s.io/v1alpha1
kind: EndpointPickerConfig
plugins:
- type: random-picker
schedulingProfiles:
- name: default
  plugins:
  - pluginRef: random-picker
`)

type simReq struct {
	user, turn   int
	model        string
	prompt       int // tokens
	arrive       float64
	host         *simHost
	conversation []string // the messages, for the picker's prefix hashes
	onDone       func()   // sends the next turn
}

type simModel struct {
	id      string
	readyAt float64
	running int
	lastUse float64
	kept    []int // users whose conversation KV is kept, oldest first
	keptTok map[int]int
}

type simHost struct {
	name    string
	models  map[string]*simModel
	queue   []*simReq
	running int
}

type event struct {
	at  float64
	seq int
	run func()
}

type events []event

func (e events) Len() int { return len(e) }
func (e events) Less(i, j int) bool {
	if e[i].at != e[j].at {
		return e[i].at < e[j].at
	}
	return e[i].seq < e[j].seq
}
func (e events) Swap(i, j int) { e[i], e[j] = e[j], e[i] }
func (e *events) Push(x any)   { *e = append(*e, x.(event)) }
func (e *events) Pop() any {
	old := *e
	x := old[len(old)-1]
	*e = old[:len(old)-1]
	return x
}

type sim struct {
	w       Workload
	hm      HostModel
	picker  *Picker
	hosts   map[string]*simHost
	now     float64
	ev      events
	seq     int
	queued  []float64
	prompt  float64
	hit     float64
	loads   int
	sysText map[string]string
	err     error
}

func (s *sim) at(t float64, f func()) {
	s.seq++
	heap.Push(&s.ev, event{at: t, seq: s.seq, run: f})
}

// Simulate replays w over n hosts of model hm, routed by a picker built
// from config.
func Simulate(ctx context.Context, config []byte, n int, hm HostModel, w Workload) (Result, error) {
	addrs := map[string]string{}
	s := &sim{w: w, hm: hm, hosts: map[string]*simHost{}, sysText: map[string]string{}}
	for i := range n {
		name := fmt.Sprintf("h%02d", i)
		addrs[name] = fmt.Sprintf("10.0.%d.%d:11435", i/250, i%250+1)
		s.hosts[name] = &simHost{name: name, models: map[string]*simModel{}}
	}
	p, err := NewPicker(ctx, config, addrs)
	if err != nil {
		return Result{}, err
	}
	s.picker = p
	rng := rand.New(rand.NewPCG(w.Seed, 1))
	zipf := rand.NewZipf(rand.New(rand.NewPCG(w.Seed, 2)), w.Zipf, 1, uint64(w.Models-1))
	for m := range w.Models {
		id := fmt.Sprintf("agent/model-%d", m)
		s.sysText[id] = words(rng, w.SystemTokens)
	}
	for u := range w.Users {
		model := fmt.Sprintf("agent/model-%d", zipf.Uint64())
		conv := []string{s.sysText[model]}
		// agents start over the first minute
		start := rng.Float64() * 60
		s.at(start, func() { s.turn(ctx, rng, u, 0, model, conv) })
	}
	for s.ev.Len() > 0 && s.err == nil {
		e := heap.Pop(&s.ev).(event)
		s.now = e.at
		e.run()
	}
	if s.err != nil {
		return Result{}, s.err
	}
	slices.Sort(s.queued)
	var sum float64
	for _, q := range s.queued {
		sum += q
	}
	r := Result{Requests: len(s.queued), Loads: s.loads}
	if len(s.queued) > 0 {
		r.QueueMean = time.Duration(sum / float64(len(s.queued)) * float64(time.Second))
		r.QueueP95 = time.Duration(s.queued[int(math.Ceil(0.95*float64(len(s.queued))))-1] * float64(time.Second))
	}
	if s.prompt > 0 {
		r.CacheHit = s.hit / s.prompt
	}
	return r, nil
}

// words is about tokens tokens of text (four characters each).
func words(rng *rand.Rand, tokens int) string {
	var b strings.Builder
	for b.Len() < 4*tokens {
		fmt.Fprintf(&b, "w%03d ", rng.IntN(1000))
	}
	return b.String()
}

// turn sends user's turn-th request.
func (s *sim) turn(ctx context.Context, rng *rand.Rand, user, turn int, model string, conv []string) {
	conv = append(slices.Clip(conv), words(rng, s.w.TurnTokens))
	r := &simReq{user: user, turn: turn, model: model, arrive: s.now, conversation: conv,
		prompt: s.w.SystemTokens + (turn+1)*s.w.TurnTokens + turn*s.w.OutputTokens}
	s.publish()
	h, err := s.picker.Pick(ctx, model, conv...)
	if err != nil {
		s.err = err
		return
	}
	r.host = s.hosts[h.Name]
	r.host.queue = append(r.host.queue, r)
	s.dispatch(r.host)
	next := func() {
		if turn+1 < s.w.Turns {
			answer := words(rng, s.w.OutputTokens)
			s.at(s.now+s.w.Think.Seconds(), func() { s.turn(ctx, rng, user, turn+1, model, append(slices.Clip(conv), answer)) })
		}
	}
	r.onDone = next
}

// publish hands every host's gauges to the picker, as a scrape would.
func (s *sim) publish() {
	for _, h := range s.picker.Hosts() {
		sh := s.hosts[h.Name]
		m := fwkdl.NewMetrics()
		m.MaxActiveModels = s.hm.MaxModels
		m.WaitingQueueSize = len(sh.queue)
		m.RunningRequestsSize = sh.running
		slots := 0
		for id, mod := range sh.models {
			if mod.readyAt <= s.now {
				m.ActiveModels[id] = 0
			} else {
				m.WaitingModels[id] = 0
			}
			slots += s.hm.Slots
		}
		if slots > 0 {
			m.KVCacheUsagePercent = float64(sh.running) / float64(slots)
		}
		m.CacheBlockSize = 16
		m.CacheNumBlocks = s.hm.MaxModels * s.hm.Slots * 16384 / 16
		m.UpdateTime = time.Now()
		h.SetMetrics(m)
	}
}

// dispatch starts what h's queue can start, in order: a request whose
// model is loaded and has a free slot runs; one whose model is not loaded
// starts its load if a model may be loaded or an idle one evicted.
func (s *sim) dispatch(h *simHost) {
	var left []*simReq
	for _, r := range h.queue {
		m := h.models[r.model]
		if m == nil {
			if len(h.models) >= s.hm.MaxModels && !s.evict(h) {
				left = append(left, r)
				continue
			}
			m = &simModel{id: r.model, readyAt: s.now + s.hm.LoadTime.Seconds(), keptTok: map[int]int{}}
			h.models[r.model] = m
			s.loads++
			s.at(m.readyAt, func() { s.dispatch(h) })
		}
		if m.readyAt > s.now || m.running >= s.hm.Slots {
			m.lastUse = s.now
			left = append(left, r)
			continue
		}
		s.start(h, m, r)
	}
	h.queue = left
}

// evict unloads h's least recently used model that runs nothing and has
// nothing waiting.
func (s *sim) evict(h *simHost) bool {
	var victim *simModel
	for _, m := range h.models {
		if m.running > 0 || m.readyAt > s.now || slices.ContainsFunc(h.queue, func(r *simReq) bool { return r.model == m.id }) {
			continue
		}
		if victim == nil || m.lastUse < victim.lastUse {
			victim = m
		}
	}
	if victim == nil {
		return false
	}
	delete(h.models, victim.id)
	return true
}

func (s *sim) start(h *simHost, m *simModel, r *simReq) {
	m.running++
	h.running++
	m.lastUse = s.now
	s.queued = append(s.queued, s.now-r.arrive)
	// A slot that kept this conversation reuses all of it; any other kept
	// one, the model's system prompt.
	cached := 0
	if tok, ok := m.keptTok[r.user]; ok {
		cached = min(tok, r.prompt)
	} else if len(m.kept) > 0 {
		cached = s.w.SystemTokens
	}
	s.prompt += float64(r.prompt)
	s.hit += float64(cached)
	took := float64(r.prompt-cached)/s.hm.PrefillPerSec + float64(s.w.OutputTokens)/s.hm.DecodePerSec
	s.at(s.now+took, func() {
		m.running--
		h.running--
		m.lastUse = s.now
		m.keep(r.user, r.prompt+s.w.OutputTokens, s.hm.KeptPerModel)
		s.dispatch(h)
		if r.onDone != nil {
			r.onDone()
		}
	})
}

func (m *simModel) keep(user, tokens, most int) {
	if i := slices.Index(m.kept, user); i >= 0 {
		m.kept = slices.Delete(m.kept, i, i+1)
	}
	m.kept = append(m.kept, user)
	m.keptTok[user] = tokens
	for len(m.kept) > most {
		delete(m.keptTok, m.kept[0])
		m.kept = m.kept[1:]
	}
}
