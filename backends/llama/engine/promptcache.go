package engine

import (
	"cmp"
	"context"
	"encoding/hex"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"time"

	yz "github.com/hybridgroup/yzma/pkg/llama"

	"github.com/modeld/modeld/backends/llama/promptcache"
	"github.com/modeld/modeld/backends/llama/wire"
)

// The on-disk prompt cache. A slot's KV is lost when its model is unloaded
// (keep-alive, memory pressure, the daemon's shutdown) or when a request
// takes the slot and keeps little of it; before that, the scheduler copies
// the slot's exact prefix (slot.exact: KV a fresh evaluation would give)
// out of llama.cpp and hands it to package promptcache, which writes it on
// its own goroutine. A request whose prompt shares more with an entry on
// disk than with its slot gets that entry's state put into its slot and
// evaluates only the rest. The state's bytes are those llama.cpp computed,
// so output after a restore is the output of a cold run, as with reuse in
// memory.
const (
	// minSaveTokens is the shortest prefix worth a file, and the least gain
	// over the slot's own prefix worth a restore.
	minSaveTokens = 64
	// shutdownWrites bounds the wait for the saves made at shutdown: within
	// the runner's own 10 s bound, and the grace the daemon gives a runner
	// with a prompt cache before it kills it (wire.PromptCacheStopGrace).
	shutdownWrites = wire.PromptCacheStopGrace - 3*time.Second
)

// openPromptCache opens the prompt cache of o for m, or returns nil when o
// asks for none or it cannot be opened (logged: the model still serves,
// with no cache on disk).
func openPromptCache(m *Model, o Options, nCtxSeq int) *promptcache.Cache {
	if o.PromptCacheDir == "" {
		return nil
	}
	sum, err := hex.DecodeString(o.ModelSHA256)
	if err != nil || len(sum) != 32 {
		slog.Warn("llama: prompt cache off: the model's sha256 is not given", "sha256", o.ModelSHA256)
		return nil
	}
	key := promptcache.Key{Model: [32]byte(sum), Config: kvConfig(m, nCtxSeq)}
	c, err := promptcache.Open(promptcache.Options{Dir: o.PromptCacheDir, MaxBytes: o.PromptCacheMax}, key)
	if err != nil {
		slog.Warn("llama: prompt cache off", "err", err)
		return nil
	}
	slog.Debug("llama: prompt cache", "dir", o.PromptCacheDir, "entries", c.Len(), "config", key.Config)
	return c
}

// kvConfig is the text that keys the KV configuration: everything that
// makes one context's sequence state unusable in another's.
func kvConfig(m *Model, nCtxSeq int) string {
	cp := yz.ContextDefaultParams()
	return fmt.Sprintf("state 1; llama %s (%s); arch %s; n_ctx_seq %d; n_layer %d; n_embd %d; n_head %d; n_head_kv %d; n_swa %d; n_vocab %d; type_k %d; type_v %d; flash_attn %d; kv_unified 0; gpu_layers %d",
		LibVersion(), libIdentity(), m.info.Arch, nCtxSeq, yz.ModelNLayer(m.model), yz.ModelNEmbd(m.model),
		yz.ModelNHead(m.model), yz.ModelNHeadKV(m.model), yz.ModelNSWA(m.model), m.nVocab,
		cp.TypeK, cp.TypeV, cp.FlashAttentionType, m.info.GPULayers)
}

// libIdentity tells builds of libllama apart that carry one version name:
// the resolved file's size and modification time.
func libIdentity() string {
	p, err := filepath.EvalSymlinks(filepath.Join(native.dir, "libllama.so"))
	if err != nil {
		return "unknown"
	}
	fi, err := os.Stat(p)
	if err != nil {
		return "unknown"
	}
	return fmt.Sprintf("%d bytes, %d", fi.Size(), fi.ModTime().Unix())
}

func toInt32(ts []yz.Token) []int32 {
	out := make([]int32, len(ts))
	for i, t := range ts {
		out[i] = int32(t)
	}
	return out
}

// keepDropped saves sl's exact prefix to disk when a request is about to
// keep only keep tokens of it, dropping minSaveTokens or more. The KV past
// the exact prefix is dropped first (it is not saved).
func (s *scheduler) keepDropped(sl *slot, keep int) {
	sd, ok := s.dec.(stateDecoder)
	if s.disk == nil || !ok || sl.exact-keep < minSaveTokens {
		return
	}
	prefix := toInt32(sl.cache[:sl.exact])
	if s.disk.Covers(prefix) {
		s.disk.TouchAsync(prefix) // used now: the newest, if it was used last
		return
	}
	if sl.exact < len(sl.cache) {
		if !s.dec.seqRemove(sl.id, sl.exact) {
			return
		}
		sl.cache = sl.cache[:sl.exact]
	}
	st := sd.seqState(sl.id)
	if st == nil {
		slog.Warn("llama: prompt cache: could not read a sequence's state", "slot", sl.id, "tokens", len(prefix))
		return
	}
	if s.disk.SaveAsync(prefix, st) {
		s.diskSaved.Add(1)
	}
}

// restorePrefix puts into sl the disk entry sharing the most of prompt
// when it gives at least minSaveTokens more than common, the prefix sl
// holds, and returns the prefix sl holds then. At least two prompt tokens
// are left to evaluate (see start).
func (s *scheduler) restorePrefix(sl *slot, prompt []yz.Token, common int) int {
	sd, ok := s.dec.(stateDecoder)
	if s.disk == nil || !ok {
		return common
	}
	p := toInt32(prompt)
	name, n := s.disk.Lookup(p)
	if min(n, len(prompt)-2)-common < minSaveTokens {
		return common
	}
	t0 := time.Now()
	tokens, st, err := s.disk.Load(name)
	loaded := time.Since(t0)
	if err != nil {
		return common // logged by Load; the prompt is evaluated
	}
	n = min(commonPrefix32(tokens, p), len(prompt)-2)
	if n-common < minSaveTokens {
		return common
	}
	t1 := time.Now()
	if !sd.setSeqState(sl.id, st) {
		slog.Warn("llama: prompt cache: llama.cpp refused a saved state", "file", name, "tokens", len(tokens))
		sl.cache, sl.exact = sl.cache[:0], 0
		return 0
	}
	sl.cache = sl.cache[:0]
	for _, t := range tokens {
		sl.cache = append(sl.cache, yz.Token(t))
	}
	sl.exact = len(sl.cache)
	s.diskRestored.Add(uint64(n))
	slog.Debug("llama: prompt cache: restored", "slot", sl.id, "tokens", n, "file", name, "bytes", len(st),
		"read_verify_ms", loaded.Milliseconds(), "set_ms", time.Since(t1).Milliseconds())
	return n
}

// diskAhead is closed when the prompt cache's read-ahead has ended; nil
// (never) without one.
func (s *scheduler) diskAhead() <-chan struct{} {
	if s.disk == nil {
		return nil
	}
	return s.disk.Ahead()
}

// prime puts the read-ahead entry into an empty slot while nothing runs,
// so the first request that shares it (the next turn of the conversation
// used last before an unload or a restart) finds it in memory, as a warm
// turn does. While requests wait, or when no slot is empty, the entry is
// dropped: a request's own restore reads what it needs.
func (s *scheduler) prime() {
	name, tokens, st, ok := s.disk.Prefetched()
	sd, isState := s.dec.(stateDecoder)
	if !ok || !isState || len(tokens) < minSaveTokens || len(tokens) > s.ctxSize {
		return
	}
	s.mu.Lock()
	waiting := len(s.waiting)
	s.mu.Unlock()
	if waiting > 0 {
		return
	}
	var sl *slot
	for _, c := range s.slots {
		if c.idle() && len(c.cache) == 0 {
			sl = c
			break
		}
	}
	if sl == nil {
		return
	}
	t0 := time.Now()
	if !sd.setSeqState(sl.id, st) {
		slog.Warn("llama: prompt cache: llama.cpp refused a saved state", "file", name, "tokens", len(tokens))
		s.dec.seqRemove(sl.id, 0)
		return
	}
	for _, t := range tokens {
		sl.cache = append(sl.cache, yz.Token(t))
	}
	sl.exact, sl.answer = len(sl.cache), pendingAnswer{}
	s.diskRestored.Add(uint64(len(tokens)))
	set := time.Since(t0)
	t1 := time.Now()
	warmed := s.warmUp(sl, tokens)
	slog.Debug("llama: prompt cache: primed a slot", "slot", sl.id, "tokens", len(tokens), "file", name,
		"set_ms", set.Milliseconds(), "warm_up", warmed, "warm_up_ms", time.Since(t1).Milliseconds())
}

// warmUp runs, on another empty slot, the steps a turn's first tokens take
// (two prompt tokens, then one, each sampled), and drops what they left:
// the first turn after a load otherwise pays for memory llama.cpp touches
// for the first time then (its compute and output buffers, the sampler's
// candidates), about a third of a warm turn's time with a 152k-token
// vocabulary. It reports whether it ran (it needs a second empty slot).
func (s *scheduler) warmUp(primed *slot, tokens []int32) bool {
	var sl *slot
	for _, c := range s.slots {
		if c != primed && c.idle() && len(c.cache) == 0 {
			sl = c
			break
		}
	}
	if sl == nil || len(tokens) < 3 {
		return false
	}
	s.dec.startSeq(sl.id, Sampling{}, constraint{})
	defer s.dec.endSeq(sl.id)
	steps := [][]batchToken{
		{{tok: yz.Token(tokens[0]), pos: 0, seq: sl.id}, {tok: yz.Token(tokens[1]), pos: 1, seq: sl.id, logits: true}},
		{{tok: yz.Token(tokens[2]), pos: 2, seq: sl.id, logits: true}},
	}
	ok := true
	for _, b := range steps {
		if err := s.dec.decode(b); err != nil {
			ok = false
			break
		}
		s.dec.sample(sl.id, int32(len(b)-1))
	}
	if !s.dec.seqRemove(sl.id, -1) {
		slog.Warn("llama: prompt cache: could not drop a warm-up's KV", "slot", sl.id)
	}
	return ok
}

func commonPrefix32(a, b []int32) int {
	n := min(len(a), len(b))
	for i := 0; i < n; i++ {
		if a[i] != b[i] {
			return i
		}
	}
	return n
}

// saveAll saves every slot's exact prefix and waits, bounded, for the
// writes (shutdown).
func (s *scheduler) saveAll() {
	if s.disk == nil {
		return
	}
	// Least recently used first: the newest entry is then the prefix of
	// the sequence used last, the one a restart reads ahead (prime).
	slots := slices.Clone(s.slots)
	slices.SortStableFunc(slots, func(a, b *slot) int { return cmp.Compare(a.used, b.used) })
	for _, sl := range slots {
		s.keepDropped(sl, 0)
	}
	ctx, cancel := context.WithTimeout(context.Background(), shutdownWrites)
	defer cancel()
	if err := s.disk.Close(ctx); err != nil {
		slog.Warn("llama: prompt cache: shutdown", "err", err)
	}
}
