package cache

import (
	"github.com/prometheus/client_golang/prometheus"
)

// metrics of one Cache; exported through the Cache's Describe and Collect.
type metrics struct {
	loads       *prometheus.CounterVec // model (resolved ids only, else ""), result: ok, error
	loadSeconds prometheus.Histogram
	evictions   *prometheus.CounterVec // reason: budget, keep_alive, unload, crash, shutdown
	queue       prometheus.Gauge       // requests waiting, all models
	busy        *prometheus.CounterVec // reason: queue_full, memory, cooldown
	requests    *prometheus.CounterVec // model: requests granted a slot
}

func newMetrics() *metrics {
	return &metrics{
		loads: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "modeld_model_loads_total", Help: "Model loads, by model id and result (ok, error); ids that name no model count under model=\"\".",
		}, []string{"model", "result"}),
		loadSeconds: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name: "modeld_model_load_seconds", Help: "Time spent loading a model.",
			Buckets: []float64{0.01, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120},
		}),
		evictions: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "modeld_model_evictions_total", Help: "Models unloaded, by reason (budget, keep_alive, unload, crash, shutdown).",
		}, []string{"reason"}),
		queue: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "modeld_queue_length", Help: "Requests waiting for a model slot or load, all models.",
		}),
		busy: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "modeld_busy_refusals_total", Help: "Requests refused at once, by reason (queue_full, memory, cooldown).",
		}, []string{"reason"}),
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "modeld_model_requests_total", Help: "Requests that got a slot on a model, by model id.",
		}, []string{"model"}),
	}
}

func (m *metrics) all() []prometheus.Collector {
	return []prometheus.Collector{m.loads, m.loadSeconds, m.evictions, m.queue, m.busy, m.requests}
}

var _ prometheus.Collector = (*Cache)(nil)

// The per-model gauges of the inference gateways' model server protocol
// (the Gateway API Inference Extension's endpoint picker, llm-d): the names
// and the model_name label their defaults read, with the semantics the
// protocol gives them. A model has a series while it is loaded, loading or
// unloading.
var (
	// TotalQueuedRequests: requests waiting for a slot of the model or for
	// its load, in the cache's queue or inside the instance.
	descWaiting = prometheus.NewDesc("vllm:num_requests_waiting",
		"Requests waiting for a slot of the model or for its load.", []string{"model_name"}, nil)
	// TotalRunningRequests: requests the model is serving now.
	descRunning = prometheus.NewDesc("vllm:num_requests_running",
		"Requests the model is serving now.", []string{"model_name"}, nil)
	// KVCacheUtilization, as a fraction (1 = full). Models without a KV
	// cache (the task pipelines) hold none: 0, so that a gateway scraping
	// a pool of them finds the series it reads.
	descKVUsage = prometheus.NewDesc("vllm:kv_cache_usage_perc",
		"Fraction of the model's KV cache that running requests hold (1 = full).", []string{"model_name"}, nil)
)

// Occupant is implemented by instances that queue and run requests
// themselves (a chat model's runner with its own slots): Occupancy reports
// them at one moment. The cache calls it without its lock, once per metrics
// scrape; an error leaves the instance's series to the cache's own counts.
type Occupant interface {
	Occupancy() (Occupancy, error)
}

// Occupancy is an instance's own view of its requests.
type Occupancy struct {
	Waiting int // requests the cache granted a slot that wait inside the instance
	// KVUsage is the fraction of the KV cache that running requests hold;
	// HasKV is false for instances without one.
	KVUsage float64
	HasKV   bool
}

// Describe implements prometheus.Collector: register the Cache itself.
func (c *Cache) Describe(ch chan<- *prometheus.Desc) {
	for _, m := range c.m.all() {
		m.Describe(ch)
	}
	ch <- descWaiting
	ch <- descRunning
	ch <- descKVUsage
}

// Collect implements prometheus.Collector.
func (c *Cache) Collect(ch chan<- prometheus.Metric) {
	for _, m := range c.m.all() {
		m.Collect(ch)
	}
	for _, o := range c.occupancy() {
		running, waiting, kv := o.running, o.waiting, 0.0
		if oc, ok := o.inst.(Occupant); ok {
			if got, err := oc.Occupancy(); err == nil {
				inside := min(got.Waiting, running)
				running, waiting = running-inside, waiting+inside
				if got.HasKV {
					kv = got.KVUsage
				}
			}
		}
		ch <- prometheus.MustNewConstMetric(descKVUsage, prometheus.GaugeValue, kv, o.id)
		ch <- prometheus.MustNewConstMetric(descWaiting, prometheus.GaugeValue, float64(waiting), o.id)
		ch <- prometheus.MustNewConstMetric(descRunning, prometheus.GaugeValue, float64(running), o.id)
	}
}

// occupant is one model id's requests in the cache at one moment.
type occupant struct {
	id               string
	waiting, running int
	inst             Instance // the ready instance, nil while loading
}

// occupancy sums the queued and slot-holding requests per model id over
// the live and the retiring instances.
func (c *Cache) occupancy() []occupant {
	c.mu.Lock()
	defer c.mu.Unlock()
	byID := map[string]int{}
	var out []occupant
	add := func(e *entry) {
		i, ok := byID[e.id]
		if !ok {
			i = len(out)
			byID[e.id] = i
			out = append(out, occupant{id: e.id})
		}
		out[i].waiting += e.queue.Len()
		out[i].running += e.inUse
		if !e.loading && !e.retired && e.inst != nil {
			out[i].inst = e.inst
		}
	}
	for _, e := range c.entries {
		add(e)
	}
	for e := range c.retiring {
		add(e)
	}
	return out
}
