package main

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"
)

// taskCost is what one thread has used: CPU time on a core (ns, from
// schedstat, so spinning counts and the tick granularity of
// /proc/PID/stat does not) and its context switches, voluntary (it
// blocked: a futex, a read) and involuntary (it was preempted).
type taskCost struct {
	cpuNs int64
	vol   int64
	invol int64
}

// snapshot is every live thread of one process, and the CPU time of the
// whole process, exited threads included (utime+stime of /proc/PID/stat,
// in clock ticks: 10 ms).
type snapshot struct {
	tasks  map[int]taskCost
	procNs int64
}

// clockTick is USER_HZ, the unit of /proc/PID/stat's times on Linux.
const clockTick = int64(10 * time.Millisecond)

// readProc reads the threads of pid ("self" for this process).
func readProc(pid string) (snapshot, error) {
	dirs, err := filepath.Glob(filepath.Join("/proc", pid, "task", "*"))
	if err != nil {
		return snapshot{}, err
	}
	if len(dirs) == 0 {
		return snapshot{}, fmt.Errorf("process %s: no threads in /proc", pid)
	}
	s := snapshot{tasks: make(map[int]taskCost, len(dirs))}
	if b, err := os.ReadFile(filepath.Join("/proc", pid, "stat")); err == nil {
		if i := bytes.LastIndexByte(b, ')'); i > 0 {
			// After "pid (comm)": state is field 3, utime 14, stime 15.
			if f := strings.Fields(string(b[i+1:])); len(f) > 12 {
				ut, _ := strconv.ParseInt(f[11], 10, 64)
				st, _ := strconv.ParseInt(f[12], 10, 64)
				s.procNs = (ut + st) * clockTick
			}
		}
	}
	for _, d := range dirs {
		tid, err := strconv.Atoi(filepath.Base(d))
		if err != nil {
			continue
		}
		var c taskCost
		b, err := os.ReadFile(filepath.Join(d, "schedstat"))
		if err != nil {
			continue // the thread exited between the glob and the read
		}
		if f := strings.Fields(string(b)); len(f) > 0 {
			c.cpuNs, _ = strconv.ParseInt(f[0], 10, 64)
		}
		st, err := os.ReadFile(filepath.Join(d, "status"))
		if err != nil {
			continue
		}
		sc := bufio.NewScanner(bytes.NewReader(st))
		for sc.Scan() {
			k, v, ok := strings.Cut(sc.Text(), ":")
			if !ok {
				continue
			}
			n, _ := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
			switch k {
			case "voluntary_ctxt_switches":
				c.vol = n
			case "nonvoluntary_ctxt_switches":
				c.invol = n
			}
		}
		s.tasks[tid] = c
	}
	return s, nil
}

// procCost is what a process used over a measurement, its threads split
// into the compute threads (the busiest ones: llama_decode's caller and
// ggml's workers, which spin at each op's barrier) and the rest (Go's
// runtime threads running goroutines: HTTP, the stream, GC).
type procCost struct {
	CPUNs        int64 `json:"cpuNs"`
	ComputeCPUNs int64 `json:"computeCpuNs"`
	Vol          int64 `json:"voluntary"`
	Invol        int64 `json:"involuntary"`
	ComputeVol   int64 `json:"computeVoluntary"`
	ComputeInvol int64 `json:"computeInvoluntary"`
	Threads      int   `json:"threads"` // live threads that ran during it
	// ExitedCPUNs is the CPU time of threads that ended before the
	// measurement did (ggml's per-graph workers when no threadpool is
	// attached): the process's total less its live threads', to the 10 ms
	// of /proc/PID/stat.
	ExitedCPUNs int64 `json:"exitedCpuNs"`
}

// diff is after − before; the compute threads are the `compute` busiest
// ones (0: none are split off).
func diff(before, after snapshot, compute int) procCost {
	type d struct{ cpu, vol, invol int64 }
	var ds []d
	for tid, a := range after.tasks {
		b := before.tasks[tid] // a thread born during the measurement counts whole
		x := d{a.cpuNs - b.cpuNs, a.vol - b.vol, a.invol - b.invol}
		if x.cpu > 0 || x.vol > 0 || x.invol > 0 {
			ds = append(ds, x)
		}
	}
	slices.SortFunc(ds, func(x, y d) int { return int(y.cpu - x.cpu) })
	var c procCost
	for i, x := range ds {
		c.CPUNs += x.cpu
		c.Vol += x.vol
		c.Invol += x.invol
		if i < compute {
			c.ComputeCPUNs += x.cpu
			c.ComputeVol += x.vol
			c.ComputeInvol += x.invol
		}
	}
	c.Threads = len(ds)
	if ex := (after.procNs - before.procNs) - c.CPUNs; ex > clockTick {
		c.ExitedCPUNs = ex
	}
	return c
}

// meter measures processes over one piece of work.
type meter struct {
	pids    []string
	compute []int
	before  []snapshot
}

func newMeter(pids []string, compute []int) *meter { return &meter{pids: pids, compute: compute} }

func (m *meter) start() error {
	m.before = m.before[:0]
	for _, p := range m.pids {
		s, err := readProc(p)
		if err != nil {
			return err
		}
		m.before = append(m.before, s)
	}
	return nil
}

func (m *meter) stop() ([]procCost, error) {
	out := make([]procCost, len(m.pids))
	for i, p := range m.pids {
		s, err := readProc(p)
		if err != nil {
			return nil, err
		}
		out[i] = diff(m.before[i], s, m.compute[i])
	}
	return out, nil
}
