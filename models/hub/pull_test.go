package hub

import (
	"github.com/modeld/modeld/internal/ggufgen"
	"github.com/modeld/modeld/models"

	"bytes"
	"context"
	"errors"
	"net/http"
	"os"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"
)

type sleepRec struct {
	mu sync.Mutex
	d  []time.Duration
}

func (s *sleepRec) sleep(ctx context.Context, d time.Duration) error {
	s.mu.Lock()
	s.d = append(s.d, d)
	s.mu.Unlock()
	return ctx.Err()
}

func (s *sleepRec) got() []time.Duration {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]time.Duration(nil), s.d...)
}

type pullEnv struct {
	s      *models.Store
	h      *fakeHub
	p      *Puller
	cfg    PullConfig
	sleeps *sleepRec
}

func newPullEnv(t *testing.T, edit func(*PullConfig)) *pullEnv {
	t.Helper()
	e := &pullEnv{s: newTestStore(t), h: newFakeHub(t), sleeps: &sleepRec{}}
	e.cfg = PullConfig{
		Endpoint: e.h.hub.URL, AllowPrivate: true, ProgressStep: 1, SidecarEvery: 1,
		BackoffBase: 10 * time.Millisecond, BackoffMax: 80 * time.Millisecond, Sleep: e.sleeps.sleep,
		Parallel: 4, ParallelThreshold: 1 << 40,
	}
	if edit != nil {
		edit(&e.cfg)
	}
	e.p = e.newPuller(t)
	return e
}

func (e *pullEnv) newPuller(t *testing.T) *Puller {
	t.Helper()
	p, err := NewPuller(e.s, e.cfg)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// projectorBytes is a tiny multimodal projector GGUF.
func projectorBytes(t *testing.T) []byte {
	t.Helper()
	var buf bytes.Buffer
	if err := ggufgen.WriteProjector(&buf, ggufgen.TinyProjector()); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

func ggufRepo(t *testing.T) map[string][]byte {
	return map[string][]byte{
		"tiny-Q4_K_M.gguf":             ggufSeed(t, 1),
		"tiny-Q8_0.gguf":               ggufSeed(t, 2),
		"README.md":                    []byte("# tiny\n"),
		".gitattributes":               []byte("*.gguf filter=lfs\n"),
		"tiny-F16-00001-of-00002.gguf": []byte("split part"),
	}
}

// TestPullGGUFWithProjector: a chat model's repository that publishes a
// multimodal projector (mmproj-*.gguf, F16 preferred) is pulled with it, as
// import --mmproj keeps one: the manifest names it and holds both files; a
// file named mmproj that is not a projector fails the pull and stores
// nothing.
func TestPullGGUFWithProjector(t *testing.T) {
	files := ggufRepo(t)
	files["mmproj-tiny-Q8_0.gguf"] = ggufSeed(t, 4) // not chosen: F16 is
	files["mmproj-tiny-F16.gguf"] = projectorBytes(t)
	e := newPullEnv(t, nil)
	e.h.addRepo("org/tiny", files)
	m, err := e.p.Pull(context.Background(), "hf:org/tiny:Q8_0", PullOptions{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if m.GGUF.Projector != "mmproj-tiny-F16.gguf" || len(m.Files) != 2 || m.Files[1].Path != "mmproj-tiny-F16.gguf" || m.Files[1].Size != int64(len(files["mmproj-tiny-F16.gguf"])) {
		t.Fatalf("manifest files %+v, projector %q", m.Files, m.GGUF.Projector)
	}
	bad := ggufRepo(t)
	bad["mmproj-tiny-F16.gguf"] = ggufSeed(t, 5) // a model, not a projector
	e2 := newPullEnv(t, nil)
	e2.h.addRepo("org/tiny", bad)
	if _, err := e2.p.Pull(context.Background(), "hf:org/tiny:Q8_0", PullOptions{}, nil); !errors.Is(err, models.ErrInvalidModel) || !strings.Contains(err.Error(), "not a multimodal projector") {
		t.Fatalf("a fake projector: %v", err)
	}
	if ms, _ := e2.s.List(); len(ms) != 0 {
		t.Fatalf("a failed pull stored %v", ms)
	}
}

func TestPullGGUFFromHub(t *testing.T) {
	e := newPullEnv(t, func(c *PullConfig) { c.Token = "hf_secret" })
	files := ggufRepo(t)
	e.h.addRepo("org/Tiny-GGUF", files)
	var events []models.Progress
	m, err := e.p.Pull(context.Background(), "hf:org/Tiny-GGUF:Q8_0", PullOptions{}, func(p models.Progress) { events = append(events, p) })
	if err != nil {
		t.Fatal(err)
	}
	want := files["tiny-Q8_0.gguf"]
	if m.ID != "org/tiny-gguf:q8_0" || m.Format != models.FormatGGUF || len(m.Files) != 1 || m.Files[0].Path != "tiny-Q8_0.gguf" ||
		m.Files[0].Digest != "sha256:"+sha256Hex(want) || m.GGUF.Architecture != "llama" || !m.GGUF.ChatTemplate {
		t.Errorf("manifest = %+v %+v", m, m.GGUF)
	}
	if m.Source.Kind != models.SourceHub || m.Source.Repo != "org/Tiny-GGUF" || m.Source.Commit != e.h.commit || m.Source.Revision != "main" {
		t.Errorf("source = %+v", m.Source)
	}
	if last := events[len(events)-1]; last.Status != models.StatusSuccess {
		t.Errorf("last event %+v", last)
	}
	var sawBytes bool
	for _, ev := range events {
		if ev.File == "tiny-Q8_0.gguf" && ev.Total == int64(len(want)) && ev.Completed == ev.Total && ev.Digest == m.Files[0].Digest {
			sawBytes = true
		}
	}
	if !sawBytes {
		t.Errorf("no progress event reached the file's total: %+v", events)
	}
	if gets, bytesServed, _ := e.h.counts(); gets != 1 || bytesServed != int64(len(want)) {
		t.Errorf("CDN served %d GETs, %d bytes; want 1 GET of %d bytes", gets, bytesServed, len(want))
	}
	// The token went to the hub on every request, never to the CDN.
	e.h.mu.Lock()
	for _, a := range e.h.auth["hub"] {
		if a != "Bearer hf_secret" {
			t.Errorf("hub request with Authorization %q", a)
		}
	}
	for _, a := range e.h.auth["cdn"] {
		if a != "" {
			t.Errorf("the token leaked to the CDN: %q", a)
		}
	}
	e.h.mu.Unlock()

	// No tag: the default order picks Q4_K_M.
	m2, err := e.p.Pull(context.Background(), "hf:org/Tiny-GGUF", PullOptions{Name: "tiny"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if m2.ID != "tiny" || m2.Files[0].Path != "tiny-Q4_K_M.gguf" {
		t.Errorf("default pick = %+v", m2.Files)
	}
	// An unknown tag lists what is there.
	_, err = e.p.Pull(context.Background(), "hf:org/Tiny-GGUF:Q2_K", PullOptions{}, nil)
	if !errors.Is(err, models.ErrRemoteNotFound) || !strings.Contains(err.Error(), "Q4_K_M, Q8_0") {
		t.Errorf("unknown tag = %v", err)
	}
	// Pulling again downloads nothing.
	before, _, _ := e.h.counts()
	if _, err := e.p.Pull(context.Background(), "hf:org/Tiny-GGUF:Q8_0", PullOptions{}, nil); err != nil {
		t.Fatal(err)
	}
	if after, _, _ := e.h.counts(); after != before {
		t.Errorf("re-pull made %d CDN GETs", after-before)
	}
}

func TestPullONNXFromHubSharesFiles(t *testing.T) {
	e := newPullEnv(t, nil)
	files := onnxFiles(t, kindEmbed)
	e.h.addRepo("Xenova/all-MiniLM-L6-v2", files)
	m, err := e.p.Pull(context.Background(), "hf:Xenova/all-MiniLM-L6-v2", PullOptions{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, f := range m.Files {
		got = append(got, f.Path)
		if f.Digest != "sha256:"+sha256Hex(files[f.Path]) {
			t.Errorf("%s digest %s", f.Path, f.Digest)
		}
	}
	want := []string{"config.json", "tokenizer.json", "tokenizer_config.json", "onnx/model.onnx", "special_tokens_map.json", "modules.json", "1_Pooling/config.json"}
	if m.ID != "xenova/all-minilm-l6-v2" || !reflect.DeepEqual(got, want) || !reflect.DeepEqual(m.Tasks, []models.Task{models.TaskEmbed}) || m.ONNX.DType != "fp32" {
		t.Errorf("manifest %s files %v tasks %v", m.ID, got, m.Tasks)
	}
	mq, err := e.p.Pull(context.Background(), "hf:Xenova/all-MiniLM-L6-v2", PullOptions{Variant: "quantized"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if mq.ID != "xenova/all-minilm-l6-v2:quantized" || mq.ONNX.Model != "onnx/model_quantized.onnx" || mq.ONNX.DType != "q8" {
		t.Errorf("variant manifest %+v %+v", mq, mq.ONNX)
	}
	e.h.mu.Lock()
	for p, n := range e.h.hubGets {
		if n != 1 {
			t.Errorf("%s fetched %d times; shared files must be fetched once", p, n)
		}
	}
	if _, ok := e.h.hubGets["README.md"]; ok {
		t.Error("README.md was fetched")
	}
	e.h.mu.Unlock()
	if gets, _, _ := e.h.counts(); gets != 2 {
		t.Errorf("%d CDN GETs, want 2 (model.onnx and model_quantized.onnx)", gets)
	}
	u, err := e.s.DiskUsage()
	if err != nil {
		t.Fatal(err)
	}
	for _, mu := range u.Models {
		if mu.Shared == 0 || len(mu.SharedWith) != 1 {
			t.Errorf("usage %+v: the variants share their JSON files", mu)
		}
	}
}

// A pull killed half-way continues with Range from where it stopped.
func TestPullResumesAfterKill(t *testing.T) {
	e := newPullEnv(t, nil)
	files := ggufRepo(t)
	e.h.addRepo("org/tiny", files)
	body := files["tiny-Q4_K_M.gguf"]
	const cut = 100_000
	e.h.cdnFault = func(n int, w http.ResponseWriter, r *http.Request, b []byte, start, end int64) bool {
		if n != 1 {
			return false
		}
		w.WriteHeader(http.StatusOK)
		_, _ = w.Write(b[:cut])
		w.(http.Flusher).Flush()
		<-r.Context().Done() // hang until the client goes away
		return true
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	_, err := e.p.Pull(ctx, "hf:org/tiny:Q4_K_M", PullOptions{}, func(p models.Progress) {
		if p.File == "tiny-Q4_K_M.gguf" && p.Completed >= cut {
			cancel() // the process is killed here
		}
	})
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("first pull = %v, want cancelled", err)
	}
	name := "sha256-" + sha256Hex(body)
	if fi, err := os.Stat(e.s.PartialPath(name)); err != nil || fi.Size() != cut {
		t.Fatalf("partial after the kill: %v, %v; want %d bytes", fi, err, cut)
	}
	if ms, _ := e.s.List(); len(ms) != 0 {
		t.Fatalf("a half-downloaded model is listed: %v", ms)
	}
	run := e.h.nextRun()
	m, err := e.newPuller(t).Pull(context.Background(), "hf:org/tiny:Q4_K_M", PullOptions{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if served := e.h.bytesOfRun(run); served != int64(len(body)-cut) {
		t.Errorf("second run served %d bytes, want the %d missing", served, len(body)-cut)
	}
	e.h.mu.Lock()
	if last := e.h.ranges[len(e.h.ranges)-1]; last != "bytes=100000-" {
		t.Errorf("resume sent Range %q", last)
	}
	e.h.mu.Unlock()
	if m.Files[0].Digest != "sha256:"+sha256Hex(body) {
		t.Errorf("digest %s", m.Files[0].Digest)
	}
	if left := contentFiles(t, e.s.Root()); len(left) != 3 { // the blob, its verification record and the manifest
		t.Errorf("store holds %v", left)
	}
}

// A large file is fetched as parallel ranges; killed half-way, it continues
// each range where it stopped.
func TestPullRangesResumeAfterKill(t *testing.T) {
	e := newPullEnv(t, func(c *PullConfig) { c.ParallelThreshold = 1 })
	files := ggufRepo(t)
	e.h.addRepo("org/tiny", files)
	body := files["tiny-Q4_K_M.gguf"]
	size := int64(len(body))
	chunks := splitRanges(size, 16)
	var firstHalf int64
	for _, c := range chunks[:8] {
		firstHalf += c.End - c.Start
	}
	var block sync.Once
	blocking := true
	e.h.cdnFault = func(n int, w http.ResponseWriter, r *http.Request, b []byte, start, end int64) bool {
		e.h.mu.Lock()
		hang := blocking && start >= chunks[8].Start
		e.h.mu.Unlock()
		if !hang {
			return false
		}
		<-r.Context().Done()
		return true
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	_, err := e.p.Pull(ctx, "hf:org/tiny:Q4_K_M", PullOptions{}, func(p models.Progress) {
		if p.File == "tiny-Q4_K_M.gguf" && p.Completed == firstHalf {
			block.Do(cancel)
		}
	})
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("first pull = %v, want cancelled", err)
	}
	name := "sha256-" + sha256Hex(body)
	sc := e.s.ReadSidecar(name)
	if sc == nil || len(sc.Chunks) != 16 {
		t.Fatalf("sidecar = %+v", sc)
	}
	var done int64
	for _, c := range sc.Chunks {
		done += c.Done
	}
	if done != firstHalf {
		t.Fatalf("sidecar records %d bytes done, want %d", done, firstHalf)
	}
	e.h.mu.Lock()
	blocking = false
	e.h.mu.Unlock()
	run := e.h.nextRun()
	m, err := e.newPuller(t).Pull(context.Background(), "hf:org/tiny:Q4_K_M", PullOptions{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	// The second run fetches the missing half; a range retried under load may
	// fetch again what it had written since its last record, never a whole range
	// that was done.
	missing := size - firstHalf
	if served := e.h.bytesOfRun(run); served < missing || served >= missing+(chunks[0].End-chunks[0].Start) {
		t.Errorf("second run served %d bytes, want the %d missing (plus less than one range)", served, missing)
	}
	if m.Files[0].Digest != "sha256:"+sha256Hex(body) {
		t.Errorf("digest %s", m.Files[0].Digest)
	}
	if e.s.ReadSidecar(name) != nil || fileExists(e.s.PartialPath(name)) {
		t.Error("partial or sidecar left after success")
	}
}

// A corrupted byte is caught by the sha256 check; the file is fetched again.
func TestPullChecksumMismatchRetries(t *testing.T) {
	for _, parallel := range []bool{false, true} {
		t.Run(map[bool]string{false: "stream", true: "ranges"}[parallel], func(t *testing.T) {
			e := newPullEnv(t, func(c *PullConfig) {
				if parallel {
					c.ParallelThreshold = 1
				}
			})
			files := ggufRepo(t)
			e.h.addRepo("org/tiny", files)
			body := files["tiny-Q4_K_M.gguf"]
			corrupted := false
			e.h.cdnFault = func(n int, w http.ResponseWriter, r *http.Request, b []byte, start, end int64) bool {
				e.h.mu.Lock()
				skip := corrupted || start > 5000 || end < 5000
				corrupted = corrupted || !skip
				e.h.mu.Unlock()
				if skip {
					return false
				}
				bad := append([]byte(nil), b[start:end+1]...)
				bad[5000-start] ^= 0x40
				w.WriteHeader(map[bool]int{false: http.StatusOK, true: http.StatusPartialContent}[parallel])
				_, _ = w.Write(bad)
				return true
			}
			var mismatch bool
			m, err := e.p.Pull(context.Background(), "hf:org/tiny", PullOptions{}, func(p models.Progress) {
				mismatch = mismatch || strings.Contains(p.Status, "mismatch")
			})
			if err != nil {
				t.Fatal(err)
			}
			if !corrupted || !mismatch {
				t.Errorf("corrupted %v, mismatch reported %v", corrupted, mismatch)
			}
			got, err := os.ReadFile(blobPath(t, e.s, sha256Hex(body)))
			if err != nil || !bytes.Equal(got, body) || m.Files[0].Digest != "sha256:"+sha256Hex(body) {
				t.Errorf("blob differs from the hub's file (%v)", err)
			}
		})
	}
}

// A server that always sends bad bytes makes the pull fail; nothing is installed.
func TestPullChecksumAlwaysWrong(t *testing.T) {
	e := newPullEnv(t, func(c *PullConfig) { c.ChecksumRetries = 2 })
	files := ggufRepo(t)
	e.h.addRepo("org/tiny", files)
	e.h.cdnFault = func(n int, w http.ResponseWriter, r *http.Request, b []byte, start, end int64) bool {
		bad := append([]byte(nil), b...)
		bad[len(bad)-1] ^= 1
		w.WriteHeader(http.StatusOK)
		_, _ = w.Write(bad)
		return true
	}
	_, err := e.p.Pull(context.Background(), "hf:org/tiny", PullOptions{}, nil)
	if !errors.Is(err, models.ErrChecksum) {
		t.Fatalf("pull = %v, want ErrChecksum", err)
	}
	if gets, _, _ := e.h.counts(); gets != 3 {
		t.Errorf("%d attempts, want 3 (1 + 2 retries)", gets)
	}
	if left := contentFiles(t, e.s.Root()); len(left) != 0 {
		t.Errorf("store holds %v after a failed pull", left)
	}
}

// Dropped connections and 5xx are survived with exponential backoff; a retry
// after progress starts the backoff over and continues where it stopped.
func TestPullSurvivesDroppedConnections(t *testing.T) {
	e := newPullEnv(t, nil)
	files := ggufRepo(t)
	e.h.addRepo("org/tiny", files)
	body := files["tiny-Q4_K_M.gguf"]
	e.h.cdnFault = func(n int, w http.ResponseWriter, r *http.Request, b []byte, start, end int64) bool {
		switch n {
		case 1, 2:
			http.Error(w, "upstream busy", http.StatusServiceUnavailable)
			return true
		case 3:
			writeThenDrop(w, http.StatusOK, b, 1000)
		case 4:
			writeThenDrop(w, http.StatusPartialContent, b[start:], 5000)
		}
		return false
	}
	m, err := e.p.Pull(context.Background(), "hf:org/tiny", PullOptions{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	want := []time.Duration{10 * time.Millisecond, 20 * time.Millisecond, 10 * time.Millisecond, 10 * time.Millisecond}
	if got := e.sleeps.got(); !reflect.DeepEqual(got, want) {
		t.Errorf("backoff waits %v, want %v", got, want)
	}
	gets, served, _ := e.h.counts()
	if gets != 5 || served-int64(len("upstream busy\n"))*2 != int64(len(body)) {
		t.Errorf("%d GETs, %d bytes served; want 5 GETs and each byte once", gets, served)
	}
	e.h.mu.Lock()
	wantRanges := []string{"", "", "", "bytes=1000-", "bytes=6000-"}
	if !reflect.DeepEqual(e.h.ranges, wantRanges) {
		t.Errorf("Range headers %q, want %q", e.h.ranges, wantRanges)
	}
	e.h.mu.Unlock()
	if m.Files[0].Digest != "sha256:"+sha256Hex(body) {
		t.Errorf("digest %s", m.Files[0].Digest)
	}
}

func TestPullGivesUpAfterRetries(t *testing.T) {
	e := newPullEnv(t, func(c *PullConfig) { c.MaxRetries = 5 })
	e.h.addRepo("org/tiny", ggufRepo(t))
	e.h.cdnFault = func(n int, w http.ResponseWriter, r *http.Request, b []byte, start, end int64) bool {
		http.Error(w, "down", http.StatusBadGateway)
		return true
	}
	_, err := e.p.Pull(context.Background(), "hf:org/tiny", PullOptions{}, nil)
	if err == nil || !strings.Contains(err.Error(), "giving up after 5 retries") || !strings.Contains(err.Error(), "502") {
		t.Fatalf("pull = %v", err)
	}
	ms := time.Millisecond
	if got, want := e.sleeps.got(), []time.Duration{10 * ms, 20 * ms, 40 * ms, 80 * ms, 80 * ms}; !reflect.DeepEqual(got, want) {
		t.Errorf("waits %v, want %v (doubling, capped)", got, want)
	}
}
