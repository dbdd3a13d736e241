// Command loadtest drives a real modeld daemon on loopback with a bounded mixed
// load — chat streams, streams the client abandons, plain chat, embeddings,
// classification, bad requests and bursts above the queue limits — and checks
// that it ends cleanly: no unintended 5xx, goroutines and memory back to their
// level after the load, no runner left after SIGTERM. It prints a report and,
// with -doc, writes it into the "## Load test" section of docs/RELIABILITY.md.
//
//	go run ./scripts/loadtest [-bin bin/modeld] [-requests 20000] [-duration 45s] [-workers 12] [-doc docs/RELIABILITY.md]
//
// It makes its own models (a tiny generated GGUF and the committed ONNX test
// models) in a temporary home, and talks only to 127.0.0.1.
package main

import (
	"bufio"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"time"

	"github.com/modeld/modeld/internal/ggufgen"
)

type options struct {
	bin      string
	libDir   string
	requests int
	duration time.Duration
	workers  int
	doc      string
	keep     bool
}

func main() {
	var o options
	flag.StringVar(&o.bin, "bin", "bin/modeld", "modeld binary to test (build it with make build)")
	flag.StringVar(&o.libDir, "lib-dir", "", "runtime libraries (default: MODELD_LIB_DIR, else ~/.local/share/modeld/lib)")
	flag.IntVar(&o.requests, "requests", 20000, "requests to send in all (the load stops at this count or at -duration)")
	flag.DurationVar(&o.duration, "duration", 45*time.Second, "longest time the load runs")
	flag.IntVar(&o.workers, "workers", 12, "concurrent clients")
	flag.StringVar(&o.doc, "doc", "", "write the report into this file's \"## Load test\" section")
	flag.BoolVar(&o.keep, "keep", false, "keep the temporary home and the daemon's log")
	flag.Parse()
	if err := run(o); err != nil {
		fmt.Fprintln(os.Stderr, "loadtest:", err)
		os.Exit(1)
	}
}

func run(o options) error {
	if o.libDir == "" {
		o.libDir = os.Getenv("MODELD_LIB_DIR")
	}
	if o.libDir == "" {
		h, err := os.UserHomeDir()
		if err != nil {
			return err
		}
		o.libDir = filepath.Join(h, ".local", "share", "modeld", "lib")
	}
	bin, err := filepath.Abs(o.bin)
	if err != nil {
		return err
	}
	if _, err := os.Stat(bin); err != nil {
		return fmt.Errorf("no modeld binary at %s (run make build): %w", bin, err)
	}
	work, err := os.MkdirTemp("", "modeld-loadtest-")
	if err != nil {
		return err
	}
	if o.keep {
		fmt.Fprintln(os.Stderr, "loadtest: keeping", work)
	} else {
		defer os.RemoveAll(work)
	}
	key := randomKey()
	d := &daemon{bin: bin, home: filepath.Join(work, "home"), libDir: o.libDir, key: key, log: filepath.Join(work, "serve.log")}
	if err := d.importModels(work); err != nil {
		return err
	}
	if err := d.start(); err != nil {
		return err
	}
	defer d.kill()
	fmt.Fprintln(os.Stderr, "loadtest: daemon on", d.base)

	c := newClient(d.base, key)
	if err := c.warmUp(); err != nil {
		return fmt.Errorf("warm-up: %w\n%s", err, d.tail())
	}
	before, err := c.vitals()
	if err != nil {
		return err
	}
	before.runnersRSS = runnersRSS(d.home)

	started := time.Now()
	res := c.load(o.requests, o.duration, o.workers)
	res.elapsed = time.Since(started)

	after, settled := c.settle(before)
	after.runnersRSS = runnersRSS(d.home)
	exit, exitErr := d.terminate(10 * time.Second)
	left := runnersLeft(d.home)

	r := report{opts: o, res: res, before: before, after: after, settled: settled, exit: exit, exitErr: exitErr, runnersLeft: left}
	text := r.markdown()
	fmt.Print(text)
	if o.doc != "" {
		if err := writeDoc(o.doc, text); err != nil {
			return err
		}
	}
	if problems := r.problems(); len(problems) > 0 {
		return fmt.Errorf("%s\n%s", strings.Join(problems, "\n"), d.tail())
	}
	return nil
}

func randomKey() string {
	b := make([]byte, 16)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// daemon is the modeld serve child process under test.
type daemon struct {
	bin, home, libDir, key, log string
	cmd                         *exec.Cmd
	base                        string
	exited                      chan error
}

func (d *daemon) env() []string {
	return append(os.Environ(), "MODELD_HOME="+d.home, "MODELD_LIB_DIR="+d.libDir, "MODELD_API_KEY="+d.key)
}

func (d *daemon) importModels(work string) error {
	if err := os.MkdirAll(d.home, 0o755); err != nil {
		return err
	}
	gguf := filepath.Join(work, "chat.gguf")
	if err := ggufgen.WriteFile(gguf, ggufgen.Tiny(ggufgen.SPM)); err != nil {
		return err
	}
	for _, imp := range [][]string{
		{gguf, "load/chat"},
		{"testdata/onnx/embed-mean", "load/embed"},
		{"testdata/onnx/classify", "load/classify"},
	} {
		cmd := exec.Command(d.bin, "import", imp[0], "--name", imp[1])
		cmd.Env = d.env()
		if out, err := cmd.CombinedOutput(); err != nil {
			return fmt.Errorf("import %s: %w\n%s", imp[0], err, out)
		}
	}
	return nil
}

var listening = regexp.MustCompile(`"msg":"modeld listening","addr":"([^"]+)"`)

// start runs modeld serve on a free loopback port with small queues, so that the
// bursts go above the limits.
func (d *daemon) start() error {
	logf, err := os.Create(d.log)
	if err != nil {
		return err
	}
	d.cmd = exec.Command(d.bin, "serve", "--listen", "127.0.0.1:0", "--log-format", "json", "--log-level", "info",
		"--queue-size", "4", "--chat-slots", "2", "--context-size", "512", "--keep-alive=-1")
	d.cmd.Env = d.env()
	stderr, err := d.cmd.StderrPipe()
	if err != nil {
		return err
	}
	d.cmd.Stdout = logf
	if err := d.cmd.Start(); err != nil {
		return err
	}
	d.exited = make(chan error, 1)
	addr := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stderr)
		sc.Buffer(make([]byte, 64<<10), 1<<20)
		for sc.Scan() {
			line := sc.Text()
			fmt.Fprintln(logf, line)
			if m := listening.FindStringSubmatch(line); m != nil {
				addr <- m[1]
			}
		}
		d.exited <- d.cmd.Wait()
		logf.Close()
	}()
	select {
	case a := <-addr:
		d.base = "http://" + a
		return nil
	case err := <-d.exited:
		d.exited <- err
		return fmt.Errorf("modeld serve exited before listening: %v\n%s", err, d.tail())
	case <-time.After(60 * time.Second):
		return fmt.Errorf("modeld serve did not listen within 60 s\n%s", d.tail())
	}
}

// terminate sends SIGTERM and waits for the exit; it returns how long that took.
func (d *daemon) terminate(limit time.Duration) (time.Duration, error) {
	start := time.Now()
	if err := d.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		return 0, err
	}
	select {
	case err := <-d.exited:
		d.exited <- err
		return time.Since(start), err
	case <-time.After(limit):
		return time.Since(start), fmt.Errorf("still running %s after SIGTERM", limit)
	}
}

func (d *daemon) kill() {
	if d.cmd != nil && d.cmd.Process != nil {
		_ = d.cmd.Process.Kill()
	}
}

// tail is the end of the daemon's log, for error messages.
func (d *daemon) tail() string {
	b, err := os.ReadFile(d.log)
	if err != nil {
		return ""
	}
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	if len(lines) > 15 {
		lines = lines[len(lines)-15:]
	}
	return "daemon log:\n" + strings.Join(lines, "\n")
}

// runnerPIDs lists the processes whose command line names the test's home: the
// daemon's runners (their model path lies under it).
func runnerPIDs(home string) []int {
	var pids []int
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		var pid int
		if _, err := fmt.Sscanf(e.Name(), "%d", &pid); err != nil {
			continue
		}
		b, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err != nil {
			continue
		}
		args := strings.Split(string(b), "\x00")
		if len(args) > 1 && args[1] == "runner" && strings.Contains(string(b), home) {
			pids = append(pids, pid)
		}
	}
	return pids
}

func runnersLeft(home string) int { return len(runnerPIDs(home)) }

// runnersRSS sums the resident memory of the runners, in bytes.
func runnersRSS(home string) int64 {
	var total int64
	for _, pid := range runnerPIDs(home) {
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/statm", pid))
		if err != nil {
			continue
		}
		var size, rss int64
		if _, err := fmt.Sscanf(string(b), "%d %d", &size, &rss); err == nil {
			total += rss * int64(os.Getpagesize())
		}
	}
	return total
}

func writeDoc(path, section string) error {
	b, err := os.ReadFile(path)
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return err
	}
	return os.WriteFile(path, []byte(updateSection(string(b), section)), 0o644)
}

// updateSection replaces the document's "## Load test" section with section.
func updateSection(doc, section string) string {
	const heading = "## Load test"
	if strings.TrimSpace(doc) == "" {
		doc = "# Reliability\n"
	}
	start := strings.Index(doc, "\n"+heading+"\n")
	if start < 0 {
		return strings.TrimRight(doc, "\n") + "\n\n" + section
	}
	start++
	end := len(doc)
	if i := strings.Index(doc[start+len(heading):], "\n## "); i >= 0 {
		end = start + len(heading) + i + 1
	}
	rest := doc[end:]
	if rest != "" {
		section = strings.TrimRight(section, "\n") + "\n\n"
	}
	return doc[:start] + section + rest
}
