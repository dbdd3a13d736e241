package main

import (
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"sync"
	"time"
)

// bandwidthResult is `bench-chat bandwidth`: the machine's memory bandwidth
// by a STREAM-style copy (one goroutine, like a one-thread decode step; a
// buffer far larger than the caches), and, given decode speeds and the
// bytes a token reads, decode as a fraction of bandwidth ÷ bytes per token.
//
// Decode reads its weights and writes almost nothing, on as many threads as
// it is given, so the read bandwidth at that thread count is the one its
// ceiling is made of: ReadGBs, a sum over a buffer split between -threads
// goroutines. The copy is STREAM's convention (reads and writes counted).
type bandwidthResult struct {
	BufferMiB int     `json:"buffer_mib"`
	CopyGBs   float64 `json:"copy_gb_s"` // bytes read plus bytes written, per second (best of the runs)
	Threads   int     `json:"threads"`   // goroutines of the read
	ReadGBs   float64 `json:"read_gb_s"` // bytes read per second by Threads goroutines (best of the runs)
}

// measureRead is the best rate at which threads goroutines read buf, each
// its own part, summing it in 8-byte words with four accumulators (enough
// loads in flight that memory, not the loop, is the limit).
func measureRead(buf []uint64, threads, runs int) float64 {
	part := len(buf) / threads
	sums := make([]uint64, threads)
	best := time.Duration(1 << 62)
	for r := 0; r < runs; r++ {
		var wg sync.WaitGroup
		start := time.Now()
		for t := range threads {
			wg.Add(1)
			go func() {
				defer wg.Done()
				p := buf[t*part : (t+1)*part]
				var a, b, c, d uint64
				for i := 0; i+4 <= len(p); i += 4 {
					a += p[i]
					b += p[i+1]
					c += p[i+2]
					d += p[i+3]
				}
				sums[t] += a + b + c + d
			}()
		}
		wg.Wait()
		best = min(best, time.Since(start))
	}
	var total uint64
	for _, s := range sums {
		total += s
	}
	readSink = total
	return float64(part*threads*8) / best.Seconds() / 1e9
}

// readSink keeps the read's sums alive.
var readSink uint64

func measureBandwidth(mib, runs, threads int) bandwidthResult {
	n := mib << 20
	src, dst := make([]byte, n), make([]byte, n)
	for i := range src {
		src[i] = byte(i)
	}
	copy(dst, src) // fault the pages in
	best := time.Duration(1 << 62)
	for r := 0; r < runs; r++ {
		start := time.Now()
		copy(dst, src)
		best = min(best, time.Since(start))
	}
	words := make([]uint64, 2*n/8) // both buffers' size: far above the caches
	for i := range words {
		words[i] = uint64(i)
	}
	return bandwidthResult{BufferMiB: mib, CopyGBs: 2 * float64(n) / best.Seconds() / 1e9,
		Threads: threads, ReadGBs: measureRead(words, threads, runs)}
}

// runBandwidth prints the copy bandwidth; with -model-bytes and -decode it
// also prints the ceiling and the fraction of it each decode speed reaches.
func runBandwidth(args []string) error {
	fs := flag.NewFlagSet("bandwidth", flag.ContinueOnError)
	mib := fs.Int("mib", 512, "size of each of the two buffers, MiB")
	runs := fs.Int("runs", 5, "copies and reads (the fastest counts)")
	threads := fs.Int("threads", 2, "goroutines of the read (the decode's threads)")
	modelBytes := fs.Int64("model-bytes", 0, "bytes of weights one decoded token reads (the GGUF's tensor data)")
	var decodes, lookups listFlag
	fs.Var(&decodes, "decode", "NAME=TOK_PER_S of a decode speed to put against the ceiling (repeatable)")
	fs.Var(&lookups, "lookup", "a `bench-chat lookup` JSON file whose median decode speeds to put against the ceiling (repeatable)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *mib < 64 {
		return errors.New("bandwidth: -mib must be at least 64 (far above the caches)")
	}
	if *threads < 1 {
		return errors.New("bandwidth: -threads must be at least 1")
	}
	res := measureBandwidth(*mib, *runs, *threads)
	out := map[string]any{"bandwidth": res}
	if *modelBytes > 0 {
		ceiling := res.ReadGBs * 1e9 / float64(*modelBytes)
		out["ceiling_tok_s"] = ceiling
		fr := map[string]float64{}
		for _, d := range decodes {
			var name string
			var v float64
			if _, err := fmt.Sscanf(replaceEq(d), "%s %g", &name, &v); err != nil {
				return fmt.Errorf("bandwidth: -decode %q: want NAME=TOK_PER_S", d)
			}
			fr[name] = v / ceiling
		}
		for _, f := range lookups {
			b, err := os.ReadFile(f)
			if err != nil {
				return err
			}
			var r lookupResult
			if err := json.Unmarshal(b, &r); err != nil {
				return fmt.Errorf("%s: %w", f, err)
			}
			for _, w := range r.Workloads {
				fr[r.Model+" "+w.Name+", lookup off"] = median(w.Plain) / ceiling
				fr[r.Model+" "+w.Name+", lookup on"] = median(w.Lookup) / ceiling
			}
		}
		out["fraction"] = fr
	}
	return json.NewEncoder(os.Stdout).Encode(out)
}

func replaceEq(s string) string {
	b := []byte(s)
	for i, c := range b {
		if c == '=' {
			b[i] = ' '
			break
		}
	}
	return string(b)
}
