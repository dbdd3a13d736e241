package hub

import (
	"github.com/modeld/modeld/models"

	"context"
	"errors"
	"net/http"
	"os"
	"reflect"
	"strings"
	"sync"
	"testing"
)

// Two concurrent pulls of one model in a process share one download.
func TestPullConcurrentSameModelOneDownload(t *testing.T) {
	e := newPullEnv(t, nil)
	files := ggufRepo(t)
	e.h.addRepo("org/tiny", files)
	entered := make(chan struct{})
	release := make(chan struct{})
	var once sync.Once
	e.h.cdnFault = func(n int, w http.ResponseWriter, r *http.Request, b []byte, start, end int64) bool {
		once.Do(func() { close(entered) })
		<-release
		return false
	}
	unblock := sync.OnceFunc(func() { close(release) })
	t.Cleanup(unblock) // before the fake hub closes, which waits for its handlers
	joined := make(chan string, 1)
	e.p.flightJoined = func(key string) { joined <- key }

	type result struct {
		m   *models.Manifest
		err error
	}
	results := make(chan result, 2)
	var events [2][]models.Progress
	for i := range 2 {
		go func() {
			if i == 1 {
				<-entered // the first pull is downloading
			}
			m, err := e.p.Pull(context.Background(), "hf:org/tiny", PullOptions{}, func(p models.Progress) { events[i] = append(events[i], p) })
			results <- result{m, err}
		}()
		if i == 1 {
			select {
			case <-joined:
			case r := <-results: // a pull ended before the second joined the first
				t.Fatalf("a pull returned before the second joined the download: %v", r.err)
			}
			unblock()
		}
	}
	var ms []*models.Manifest
	for range 2 {
		r := <-results
		if r.err != nil {
			t.Fatal(r.err)
		}
		ms = append(ms, r.m)
	}
	if !reflect.DeepEqual(ms[0], ms[1]) {
		t.Errorf("the two pulls returned different manifests")
	}
	gets, served, trees := e.h.counts()
	if gets != 1 || trees != 1 || served != int64(len(files["tiny-Q4_K_M.gguf"])) {
		t.Errorf("%d CDN GETs, %d tree listings, %d bytes; want one download", gets, trees, served)
	}
	for i, ev := range events {
		if len(ev) == 0 || ev[len(ev)-1].Status != models.StatusSuccess {
			t.Errorf("caller %d did not see success: %v", i, ev)
		}
	}
}

// Two processes (two Pullers on one store) pulling one file: the second waits
// on the partial's lock, then finds the blob and downloads nothing.
func TestPullTwoProcessesShareThroughPartialLock(t *testing.T) {
	e := newPullEnv(t, nil)
	files := ggufRepo(t)
	e.h.addRepo("org/tiny", files)
	entered := make(chan struct{})
	release := make(chan struct{})
	var once sync.Once
	e.h.cdnFault = func(n int, w http.ResponseWriter, r *http.Request, b []byte, start, end int64) bool {
		once.Do(func() { close(entered) })
		<-release
		return false
	}
	waiting := make(chan string, 1)
	other := e.newPuller(t)
	other.partialWait = func(name string) { waiting <- name } // the second waits

	errc := make(chan error, 2)
	go func() {
		_, err := e.p.Pull(context.Background(), "hf:org/tiny", PullOptions{}, nil)
		errc <- err
	}()
	select {
	case <-entered:
	case err := <-errc:
		t.Fatalf("the first pull returned before downloading: %v", err)
	}
	var exists bool
	go func() {
		_, err := other.Pull(context.Background(), "hf:org/tiny", PullOptions{Name: "tiny2"}, func(p models.Progress) {
			exists = exists || p.Status == models.StatusExists
		})
		errc <- err
	}()
	select {
	case name := <-waiting:
		if name != "sha256-"+sha256Hex(files["tiny-Q4_K_M.gguf"]) {
			t.Errorf("waited on %q", name)
		}
	case err := <-errc: // a pull ended before the second waited on the first
		close(release)
		t.Fatalf("a pull returned before the second waited on the partial's lock: %v", err)
	}
	close(release)
	for range 2 {
		if err := <-errc; err != nil {
			t.Fatal(err)
		}
	}
	if gets, _, _ := e.h.counts(); gets != 1 {
		t.Errorf("%d CDN GETs, want 1", gets)
	}
	if !exists {
		t.Error("the second process did not report the file as already present")
	}
	if n := blobCount(t, e.s); n != 1 {
		t.Errorf("%d blobs", n)
	}
}

func TestPullOfflineRefusesNetwork(t *testing.T) {
	e := newPullEnv(t, func(c *PullConfig) { c.Offline = true })
	e.h.addRepo("org/tiny", ggufRepo(t))
	for _, ref := range []string{"hf:org/tiny", e.h.cdn.URL + "/dl/x.gguf"} {
		_, err := e.p.Pull(context.Background(), ref, PullOptions{}, nil)
		if !errors.Is(err, models.ErrOffline) || !strings.Contains(err.Error(), "offline") {
			t.Errorf("offline pull of %s = %v", ref, err)
		}
	}
	e.h.mu.Lock()
	defer e.h.mu.Unlock()
	if len(e.h.auth["hub"])+len(e.h.auth["cdn"]) != 0 {
		t.Errorf("offline mode reached the network: %v", e.h.auth)
	}
}

// A server that ignores Range: a resumed stream starts over cleanly, and a
// ranged download falls back to one stream.
func TestPullServerIgnoresRange(t *testing.T) {
	for _, parallel := range []bool{false, true} {
		t.Run(map[bool]string{false: "resume", true: "ranges"}[parallel], func(t *testing.T) {
			e := newPullEnv(t, func(c *PullConfig) {
				if parallel {
					c.ParallelThreshold = 1
				}
			})
			files := ggufRepo(t)
			e.h.addRepo("org/tiny", files)
			e.h.noRange = true
			body := files["tiny-Q4_K_M.gguf"]
			name := "sha256-" + sha256Hex(body)
			if !parallel { // an earlier run left half the file
				writeFile(t, e.s.PartialPath(name), body[:1000])
				if err := e.s.WriteSidecar(name, &models.Sidecar{Source: e.p.hub.resolveURL("org/tiny", e.h.commit, "tiny-Q4_K_M.gguf"),
					Digest: "sha256:" + sha256Hex(body), ETag: sha256Hex(body), Size: int64(len(body))}); err != nil {
					t.Fatal(err)
				}
			}
			m, err := e.p.Pull(context.Background(), "hf:org/tiny", PullOptions{}, nil)
			if err != nil {
				t.Fatal(err)
			}
			got, _ := os.ReadFile(blobPath(t, e.s, sha256Hex(body)))
			if string(got) != string(body) || m.Files[0].Size != int64(len(body)) {
				t.Error("blob differs")
			}
			e.h.mu.Lock()
			defer e.h.mu.Unlock()
			if !parallel && (len(e.h.ranges) != 1 || e.h.ranges[0] != "bytes=1000-") {
				t.Errorf("ranges %q, want one resume request answered with the whole file", e.h.ranges)
			}
		})
	}
}

// A plain URL: no published checksum, the sha256 of what arrived is recorded;
// a hub resolve URL used as a plain URL is checked against X-Linked-Etag and
// gets no token on the CDN.
func TestPullURL(t *testing.T) {
	e := newPullEnv(t, func(c *PullConfig) { c.Token = "hf_secret" })
	body := ggufSeed(t, 9)
	e.h.dl["Tiny-Chat.Q4_0.gguf"] = body
	m, err := e.p.Pull(context.Background(), e.h.cdn.URL+"/dl/Tiny-Chat.Q4_0.gguf", PullOptions{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if m.ID != "tiny-chat.q4_0" || m.Source.Kind != models.SourceURL || m.Files[0].Digest != "sha256:"+sha256Hex(body) || m.Files[0].Path != "Tiny-Chat.Q4_0.gguf" {
		t.Errorf("manifest %+v", m)
	}
	files := ggufRepo(t)
	e.h.addRepo("org/tiny", files)
	m, err = e.p.Pull(context.Background(), e.h.hub.URL+"/org/tiny/resolve/"+e.h.commit+"/tiny-Q8_0.gguf", PullOptions{Name: "direct"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if m.Files[0].Digest != "sha256:"+sha256Hex(files["tiny-Q8_0.gguf"]) {
		t.Errorf("digest %s", m.Files[0].Digest)
	}
	e.h.mu.Lock()
	for _, a := range e.h.auth["cdn"] {
		if a != "" {
			t.Errorf("token sent to a non-hub host: %q", a)
		}
	}
	e.h.mu.Unlock()
	// A URL whose server answers a different file than it published fails.
	e.h.cdnFault = func(n int, w http.ResponseWriter, r *http.Request, b []byte, start, end int64) bool {
		w.WriteHeader(http.StatusOK)
		_, _ = w.Write(append([]byte("X"), b[1:]...))
		return true
	}
	_, err = e.p.Pull(context.Background(), e.h.hub.URL+"/org/tiny/resolve/"+e.h.commit+"/tiny-Q4_K_M.gguf", PullOptions{Name: "bad"}, nil)
	if !errors.Is(err, models.ErrChecksum) {
		t.Errorf("corrupted URL pull = %v, want ErrChecksum", err)
	}
}

// Pagination of the listing, a renamed repository (relative redirect, token
// kept on the hub), and hub errors.
func TestPullHubProtocolDetails(t *testing.T) {
	e := newPullEnv(t, func(c *PullConfig) { c.Token = "tok" })
	e.h.pageSize = 2
	e.h.addRepo("org/new-name", onnxFiles(t, kindSummarize))
	e.h.renamed["org/old-name"] = "org/new-name"
	e.h.repos["org/old-name"] = e.h.repos["org/new-name"]
	m, err := e.p.Pull(context.Background(), "hf:org/old-name", PullOptions{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(m.Tasks, []models.Task{models.TaskSummarize}) || m.ONNX.Decoder != "onnx/decoder_model_merged.onnx" {
		t.Errorf("tasks %v onnx %+v", m.Tasks, m.ONNX)
	}
	e.h.mu.Lock()
	if e.h.apiCalls < 4 {
		t.Errorf("%d API calls; the listing has several pages", e.h.apiCalls)
	}
	for _, a := range e.h.auth["hub"] {
		if a != "Bearer tok" {
			t.Errorf("hub request without the token after a same-host redirect: %q", a)
		}
	}
	e.h.mu.Unlock()

	_, err = e.p.Pull(context.Background(), "hf:org/missing", PullOptions{}, nil)
	if !errors.Is(err, models.ErrRemoteNotFound) {
		t.Errorf("missing repo = %v", err)
	}
	e.h.mu.Lock()
	e.h.status = http.StatusUnauthorized
	e.h.mu.Unlock()
	_, err = e.p.Pull(context.Background(), "hf:org/new-name", PullOptions{}, nil)
	if !errors.Is(err, models.ErrUnauthorized) || !strings.Contains(err.Error(), "HF_TOKEN") {
		t.Errorf("401 = %v", err)
	}
	var se interface{ HTTPStatus() int }
	if !errors.As(err, &se) || se.HTTPStatus() != http.StatusBadGateway {
		t.Errorf("401 from the hub maps to %v", se)
	}
}

func TestParseRef(t *testing.T) {
	for _, tc := range []struct {
		in, repo, tag string
		kind          models.SourceKind
	}{
		{"hf:Xenova/all-MiniLM-L6-v2", "Xenova/all-MiniLM-L6-v2", "", models.SourceHub},
		{"hf:Qwen/Qwen2.5-0.5B-Instruct-GGUF:Q4_K_M", "Qwen/Qwen2.5-0.5B-Instruct-GGUF", "Q4_K_M", models.SourceHub},
		{"hf:a/b:f16", "a/b", "f16", models.SourceHub},
		{"https://example.test/models/x.gguf", "", "", models.SourceURL},
		{"http://127.0.0.1:8080/x.GGUF", "", "", models.SourceURL},
	} {
		r, err := parseRef(tc.in)
		if err != nil || r.kind != tc.kind || r.repo != tc.repo || r.tag != tc.tag {
			t.Errorf("parseRef(%q) = %+v, %v", tc.in, r, err)
		}
	}
	for _, bad := range []string{"", "tiny", "hf:", "hf:owner", "hf:a/b/c", "hf:../b", "hf:a/..", "hf:a/b:latest", "hf:a/b:Q4:x",
		"hf:a b/c", "ftp://x/y.gguf", "https://x/model.onnx", "https:///x.gguf", "file:///etc/passwd"} {
		if _, err := parseRef(bad); !errors.Is(err, models.ErrInvalidRef) {
			t.Errorf("parseRef(%q) = %v, want ErrInvalidRef", bad, err)
		}
	}
}
