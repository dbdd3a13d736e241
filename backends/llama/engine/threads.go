package engine

import (
	"log/slog"

	yz "github.com/hybridgroup/yzma/pkg/llama"
)

// attachThreadpools gives a context CPU thread pools of its own that live as
// long as it: one of threads for one-token steps, one of batchThreads for
// prompt chunks (the same pool when the counts agree). Without them, the
// prebuilt CPU backend (built without OpenMP) makes and joins new threads
// for every llama_decode: on a busy machine the new threads wait to be
// scheduled at every token, which cut decode to a small fraction of its
// speed in docs/PERFORMANCE.md's measurements, and even on an idle one the
// thread start is paid per token. A backend that cannot make pools (an
// OpenMP build keeps its own threads) gets none and runs as before.
func attachThreadpools(lctx yz.Context, threads, batchThreads int) []yz.Threadpool {
	if threads < 1 {
		return nil
	}
	if batchThreads < 1 {
		batchThreads = threads
	}
	p := yz.ThreadpoolParamsDefault(int32(threads))
	pool, err := yz.ThreadpoolNew(&p)
	if err != nil {
		slog.Debug("llama: no CPU thread pool; the backend makes threads per step", "err", err)
		return nil
	}
	pools := []yz.Threadpool{pool}
	batch := pool
	if batchThreads != threads {
		bp := yz.ThreadpoolParamsDefault(int32(batchThreads))
		if b, err := yz.ThreadpoolNew(&bp); err == nil {
			batch = b
			pools = append(pools, b)
		}
	}
	yz.AttachThreadpool(lctx, uintptr(pool), uintptr(batch))
	return pools
}

// freeThreadpools frees pools once their context is freed.
func freeThreadpools(pools []yz.Threadpool) {
	for _, p := range pools {
		yz.ThreadpoolFree(p)
	}
}
