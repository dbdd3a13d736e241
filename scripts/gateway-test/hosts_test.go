package gatewaytest

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

// The daemon and the model the tests run: make test-gateway builds
// bin/modeld from the repository and generates a tiny GGUF
// (scripts/gen-gguf) and passes both.
var (
	modeldBin = os.Getenv("MODELD_BIN")
	tinyGGUF  = os.Getenv("MODELD_TEST_GGUF")
)

// libDir is where the runtime libraries are (scripts/bootstrap put them),
// shared by the daemons: MODELD_LIB_DIR, else the default of a user's
// modeld (which a daemon with its own MODELD_HOME would not look in).
func libDir() string {
	if dir := os.Getenv("MODELD_LIB_DIR"); dir != "" {
		return dir
	}
	if xdg := os.Getenv("XDG_DATA_HOME"); xdg != "" {
		return filepath.Join(xdg, "modeld", "lib")
	}
	h, _ := os.UserHomeDir()
	return filepath.Join(h, ".local", "share", "modeld", "lib")
}

func TestMain(m *testing.M) {
	if modeldBin == "" || tinyGGUF == "" {
		fmt.Fprintln(os.Stderr, "MODELD_BIN and MODELD_TEST_GGUF are not set: run make test-gateway from the repository root")
		os.Exit(1)
	}
	os.Exit(m.Run())
}

// daemon is one running `modeld serve`.
type daemon struct {
	name string
	addr string // host:port it listens on
}

func (d *daemon) url(path string) string { return "http://" + d.addr + path }

// startHost imports the tiny model under each of models into a fresh store
// and starts a daemon on it with two chat slots; extra are further serve
// flags. The daemon is stopped at the end of the test.
func startHost(t *testing.T, name string, models []string, extra ...string) *daemon {
	t.Helper()
	home := t.TempDir()
	env := append(os.Environ(), "MODELD_HOME="+home, "MODELD_LOG_FORMAT=json", "MODELD_LIB_DIR="+libDir())
	for _, m := range models {
		cmd := exec.Command(modeldBin, "import", tinyGGUF, "--name", m)
		cmd.Env = env
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("%s: import %s: %v\n%s", name, m, err, out)
		}
	}
	args := append([]string{"serve", "--listen", "127.0.0.1:0", "--chat-slots", "2", "--context-size", "16384", "--keep-alive=-1"}, extra...)
	cmd := exec.Command(modeldBin, args...)
	cmd.Env = env
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	var logMu sync.Mutex
	var logs strings.Builder
	listening := make(chan string, 1)
	drained := make(chan struct{})
	go func() {
		defer close(drained)
		sc := bufio.NewScanner(stderr)
		sc.Buffer(make([]byte, 1<<20), 1<<20)
		for sc.Scan() {
			line := sc.Text()
			logMu.Lock()
			logs.WriteString(line + "\n")
			logMu.Unlock()
			var rec struct {
				Msg  string `json:"msg"`
				Addr string `json:"addr"`
			}
			if json.Unmarshal([]byte(line), &rec) == nil && rec.Msg == "modeld listening" {
				listening <- rec.Addr
			}
		}
	}()
	t.Cleanup(func() {
		_ = cmd.Process.Signal(os.Interrupt)
		done := make(chan struct{})
		go func() { _ = cmd.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(30 * time.Second):
			_ = cmd.Process.Kill()
			<-done
		}
		<-drained
		if t.Failed() {
			logMu.Lock()
			t.Logf("%s log:\n%s", name, logs.String())
			logMu.Unlock()
		}
	})
	select {
	case addr := <-listening:
		return &daemon{name: name, addr: addr}
	case <-drained:
		_ = cmd.Wait()
		t.Fatalf("%s exited before listening:\n%s", name, logs.String())
	case <-time.After(2 * time.Minute):
		t.Fatalf("%s did not listen within 2 minutes", name)
	}
	return nil
}

// chat sends one short greedy chat request for model, which loads it.
func chat(t *testing.T, d *daemon, model string) {
	t.Helper()
	body := fmt.Sprintf(`{"model":%q,"max_tokens":1,"temperature":0,"messages":[{"role":"user","content":"Hi"}]}`, model)
	res, err := http.Post(d.url("/v1/chat/completions"), "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(res.Body)
	res.Body.Close()
	if res.StatusCode != http.StatusOK {
		t.Fatalf("%s: chat %s: %d %s", d.name, model, res.StatusCode, b)
	}
}

// busy starts n long streaming generations of model on d (with two slots,
// two run and the rest wait; a waiting stream has no answer yet, so the
// caller waits for the gauges, not for the answers). They are cancelled by
// the returned stop or at the end of the test; a stream that fails before
// fails the test.
func busy(t *testing.T, d *daemon, model string, n int) (stop func()) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	for range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			body := fmt.Sprintf(`{"model":%q,"stream":true,"max_tokens":15000,"temperature":0,
				"messages":[{"role":"user","content":"Tell me a long story."}]}`, model)
			req, _ := http.NewRequestWithContext(ctx, http.MethodPost, d.url("/v1/chat/completions"), strings.NewReader(body))
			req.Header.Set("Content-Type", "application/json")
			res, err := http.DefaultClient.Do(req)
			if err == nil {
				if res.StatusCode != http.StatusOK {
					b, _ := io.ReadAll(res.Body)
					err = fmt.Errorf("%d %s", res.StatusCode, b)
				} else {
					_, err = io.Copy(io.Discard, res.Body)
				}
				res.Body.Close()
			}
			if err != nil && ctx.Err() == nil {
				t.Errorf("%s: stream of %s: %v", d.name, model, err)
			}
		}()
	}
	var once sync.Once
	stop = func() { once.Do(func() { cancel(); wg.Wait() }) }
	t.Cleanup(stop)
	return stop
}

// newPicker is the picker of docs/SCALING.md over daemons.
func newPicker(t *testing.T, daemons ...*daemon) *Picker {
	t.Helper()
	hosts := map[string]string{}
	for _, d := range daemons {
		hosts[d.name] = d.addr
	}
	p, err := NewPicker(context.Background(), ModeldConfig, hosts)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// refreshUntil refreshes the picker's view of the hosts until cond holds
// (a daemon's gauges follow its requests within a scrape or two); it fails
// the test after a generous ceiling.
func refreshUntil(t *testing.T, p *Picker, what string, cond func(errs map[string]error) bool) map[string]error {
	t.Helper()
	deadline := time.Now().Add(2 * time.Minute)
	for {
		errs := p.Refresh(context.Background())
		if cond(errs) {
			return errs
		}
		if time.Now().After(deadline) {
			for _, h := range p.Hosts() {
				t.Logf("%s: %+v (scrape: %v)", h.Name, h.Metrics(), errs[h.Name])
			}
			t.Fatalf("the picker never saw %s", what)
		}
		time.Sleep(50 * time.Millisecond) // the picker's own scrape interval
	}
}

// picks counts, over n picks of model, where the picker sent each; prompt
// gives the i-th request's messages.
func picks(t *testing.T, p *Picker, model string, n int, prompt func(i int) []string) map[string]int {
	t.Helper()
	got := map[string]int{}
	for i := range n {
		h, err := p.Pick(context.Background(), model, prompt(i)...)
		if err != nil {
			t.Fatal(err)
		}
		got[h.Name]++
	}
	return got
}

// distinct is a prompt that shares no prefix with another's.
func distinct(i int) []string {
	return []string{fmt.Sprintf("%04d: question number %d about something else entirely", i*7919%10000, i)}
}

// readFile reads a test file of the module.
func readFile(t *testing.T, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(".", name))
	if err != nil {
		t.Fatal(err)
	}
	return b
}
