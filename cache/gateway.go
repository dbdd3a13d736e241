package cache

import (
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

var _ prometheus.Collector = (*Cache)(nil)

// The gauges of the inference gateways' model server protocol (the Gateway
// API Inference Extension's endpoint picker, llm-d): the names and the
// model_name label their defaults read, with the semantics the protocol
// gives them.
//
// Each of the three load families starts with the host's series,
// model_name="" (it sorts first, so a spec without a label reads it): the
// sums over the models, and for the KV cache the tokens held over the
// tokens there are, over the loaded chat models. The families are there
// with nothing loaded (the host series at 0), so a picker always finds the
// host ready and idle. A model has its own series while it is loaded,
// loading or unloading, at 0 while the store lists it (WithListed), and at
// 0 for gatewayLinger after its last instance went away, so that a spec
// labelled with its id never reads a stale value.
var (
	// TotalQueuedRequests: requests waiting for a slot of the model or for
	// its load, in the cache's queue or inside the instance.
	descWaiting = prometheus.NewDesc("vllm:num_requests_waiting",
		"Requests waiting for a slot of the model or for its load; model_name=\"\" is the host: all models.", []string{"model_name"}, nil)
	// TotalRunningRequests: requests the model is serving now.
	descRunning = prometheus.NewDesc("vllm:num_requests_running",
		"Requests the model is serving now; model_name=\"\" is the host: all models.", []string{"model_name"}, nil)
	// KVCacheUtilization, as a fraction (1 = full). Models without a KV
	// cache (the task pipelines) hold none: 0, so that a gateway scraping
	// a pool of them finds the series it reads.
	descKVUsage = prometheus.NewDesc("vllm:kv_cache_usage_perc",
		"Fraction of the model's KV cache that running requests hold (1 = full); model_name=\"\" is the host: tokens held over tokens there are, all loaded chat models.", []string{"model_name"}, nil)
	// The loaded models, as the protocol's LoRA adapters: a picker's
	// LoRA-affinity scorer sends a model's requests to a host that holds
	// it. One series, whose value is the Unix time its labels last changed.
	descLoRA = prometheus.NewDesc("vllm:lora_requests_info",
		"The models loaded (running_lora_adapters) and loading (waiting_lora_adapters), and how many may be (max_lora); the value is the Unix time these last changed.",
		[]string{"max_lora", "running_lora_adapters", "waiting_lora_adapters"}, nil)
	// The KV cache's size, for a picker's prefix index: the loaded chat
	// models' KV tokens, in blocks of cacheBlockTokens.
	descCacheConfig = prometheus.NewDesc("vllm:cache_config_info",
		"The KV cache of the loaded chat models: num_gpu_blocks blocks of block_size tokens.", []string{"block_size", "num_gpu_blocks"}, nil)
)

// gatewayLinger is how long a model's gauges stay, at 0, once its last
// instance went away.
const gatewayLinger = 10 * time.Minute

// cacheBlockTokens is the block size vllm:cache_config_info reports. The
// slots keep and reuse a prompt's KV to the token; a picker hashes prompts
// in blocks of this many tokens.
const cacheBlockTokens = 16

// gatewayState is what the gateway gauges last showed; Cache.mu guards it.
type gatewayState struct {
	seen   map[string]time.Time // model id -> last time it had an instance
	lora   string               // the labels of the last lora_requests_info
	loraAt time.Time            // when they changed
}

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
	// KVHeld is the KV cache tokens that running requests hold, of
	// KVTotal (0 for instances without a KV cache).
	KVHeld, KVTotal int
}

// Describe implements prometheus.Collector: register the Cache itself.
func (c *Cache) Describe(ch chan<- *prometheus.Desc) {
	for _, m := range c.m.all() {
		m.Describe(ch)
	}
	for _, d := range []*prometheus.Desc{descWaiting, descRunning, descKVUsage, descLoRA, descCacheConfig} {
		ch <- d
	}
}

// Collect implements prometheus.Collector.
func (c *Cache) Collect(ch chan<- prometheus.Metric) {
	for _, m := range c.m.all() {
		m.Collect(ch)
	}
	var listed []string
	if c.listed != nil {
		listed = c.listed()
	}
	occ, lora := c.occupancy(listed)
	var hostWaiting, hostRunning, held, total int
	for _, o := range occ {
		running, waiting, kv := o.running, o.waiting, 0.0
		if oc, ok := o.inst.(Occupant); ok {
			if got, err := oc.Occupancy(); err == nil {
				inside := min(got.Waiting, running)
				running, waiting = running-inside, waiting+inside
				if got.KVTotal > 0 {
					kv = min(1, float64(got.KVHeld)/float64(got.KVTotal))
					held, total = held+min(got.KVHeld, got.KVTotal), total+got.KVTotal
				}
			}
		}
		hostWaiting, hostRunning = hostWaiting+waiting, hostRunning+running
		ch <- prometheus.MustNewConstMetric(descKVUsage, prometheus.GaugeValue, kv, o.id)
		ch <- prometheus.MustNewConstMetric(descWaiting, prometheus.GaugeValue, float64(waiting), o.id)
		ch <- prometheus.MustNewConstMetric(descRunning, prometheus.GaugeValue, float64(running), o.id)
	}
	hostKV := 0.0
	if total > 0 {
		hostKV = float64(held) / float64(total)
	}
	ch <- prometheus.MustNewConstMetric(descKVUsage, prometheus.GaugeValue, hostKV, "")
	ch <- prometheus.MustNewConstMetric(descWaiting, prometheus.GaugeValue, float64(hostWaiting), "")
	ch <- prometheus.MustNewConstMetric(descRunning, prometheus.GaugeValue, float64(hostRunning), "")
	ch <- prometheus.MustNewConstMetric(descLoRA, prometheus.GaugeValue, float64(lora.at.UnixNano())/1e9,
		lora.max, lora.running, lora.waiting)
	ch <- prometheus.MustNewConstMetric(descCacheConfig, prometheus.GaugeValue, 1,
		strconv.Itoa(cacheBlockTokens), strconv.Itoa(total/cacheBlockTokens))
}

// occupant is one model id's requests in the cache at one moment.
type occupant struct {
	id               string
	waiting, running int
	inst             Instance // the ready instance, nil while loading
}

// loraInfo is the labels and the value of vllm:lora_requests_info.
type loraInfo struct {
	max, running, waiting string
	at                    time.Time
}

// occupancy sums the queued and slot-holding requests per model id over
// the live and the retiring instances, adds the listed and the lingering
// ids at 0, and says which models are loaded and loading.
func (c *Cache) occupancy(listed []string) ([]occupant, loraInfo) {
	c.mu.Lock()
	defer c.mu.Unlock()
	now := time.Now()
	if c.gw.seen == nil {
		c.gw.seen = map[string]time.Time{}
	}
	byID := map[string]int{}
	var out []occupant
	slot := func(id string) *occupant {
		i, ok := byID[id]
		if !ok {
			i = len(out)
			byID[id] = i
			out = append(out, occupant{id: id})
		}
		return &out[i]
	}
	var ready, loading []string
	add := func(e *entry) {
		o := slot(e.id)
		o.waiting += e.queue.Len()
		o.running += e.inUse
		c.gw.seen[e.id] = now
		if !e.loading && !e.retired && e.inst != nil {
			o.inst = e.inst
		}
	}
	for _, e := range c.entries {
		add(e)
		if e.loading {
			loading = append(loading, e.id)
		} else if !e.retired && e.inst != nil {
			ready = append(ready, e.id)
		}
	}
	for e := range c.retiring {
		add(e)
	}
	for id, at := range c.gw.seen {
		if _, ok := byID[id]; ok {
			continue
		}
		if now.Sub(at) >= gatewayLinger {
			delete(c.gw.seen, id)
			continue
		}
		slot(id)
	}
	for _, id := range listed {
		slot(id)
	}

	maxLoaded := c.cfg.MaxLoaded
	if maxLoaded == 0 { // no limit but memory: room for one more
		maxLoaded = len(ready) + len(loading) + 1
	}
	slices.Sort(ready)
	slices.Sort(loading)
	info := loraInfo{max: strconv.Itoa(maxLoaded), running: strings.Join(ready, ","), waiting: strings.Join(loading, ",")}
	key := info.max + "\x00" + info.running + "\x00" + info.waiting
	if key != c.gw.lora || c.gw.loraAt.IsZero() {
		c.gw.lora, c.gw.loraAt = key, now
	}
	info.at = c.gw.loraAt
	return out, info
}
