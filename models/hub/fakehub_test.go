package hub

import (
	"crypto/sha1" //nolint:gosec // git blob ids
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
)

// fakeHub speaks the parts of the Hugging Face hub protocol that pulls use:
//
//	GET  /api/models/{owner}/{repo}/revision/{rev}            {"sha": commit}
//	GET  /api/models/{owner}/{repo}/tree/{rev}?recursive=true  file list with oid, size, lfs{oid,size}; paginated with Link
//	HEAD|GET /{owner}/{repo}/resolve/{rev}/{path}              LFS: 302 to the CDN (another host) with
//	                                                           X-Linked-Etag, X-Linked-Size, X-Repo-Commit;
//	                                                           other files: 200 with ETag = git blob id
//
// and a CDN server (a second host) that serves /lfs/{sha256} and /dl/{name}
// with Range support. Tests count requests and bytes, and inject faults.
type fakeHub struct {
	t      *testing.T
	hub    *httptest.Server
	cdn    *httptest.Server
	commit string

	mu       sync.Mutex
	repos    map[string]map[string][]byte // repo -> path -> content
	renamed  map[string]string            // old repo -> new repo (same-host relative redirect)
	dl       map[string][]byte            // CDN /dl/{name}: plain URL files
	pageSize int
	noRange  bool
	status   int // when not 0, every hub API request answers it
	// cdnFault, when set, may answer a CDN GET itself (returning true). n counts
	// CDN GETs from 1; w counts the bytes written.
	cdnFault func(n int, w http.ResponseWriter, r *http.Request, body []byte, start, end int64) bool

	run       int           // tests bump it between pulls; bytes are counted per run
	runBytes  map[int]int64 // CDN body bytes written by requests that started in each run
	apiCalls  int
	treeCalls int
	cdnGets   int
	cdnBytes  int64
	hubGets   map[string]int // GETs of non-LFS files per path
	ranges    []string       // Range headers of CDN GETs
	auth      map[string][]string
}

func newFakeHub(t *testing.T) *fakeHub {
	h := &fakeHub{
		t: t, commit: strings.Repeat("c0ffee", 6) + "abcd",
		repos: map[string]map[string][]byte{}, renamed: map[string]string{}, dl: map[string][]byte{},
		hubGets: map[string]int{}, auth: map[string][]string{}, runBytes: map[int]int64{},
	}
	h.hub = httptest.NewServer(http.HandlerFunc(h.serveHub))
	h.cdn = httptest.NewServer(http.HandlerFunc(h.serveCDN))
	t.Cleanup(h.cdn.Close)
	t.Cleanup(h.hub.Close)
	return h
}

func (h *fakeHub) addRepo(repo string, files map[string][]byte) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.repos[repo] = files
}

func isLFS(path string) bool {
	return strings.HasSuffix(path, ".onnx") || strings.HasSuffix(path, ".gguf")
}

func gitBlobID(b []byte) string {
	h := sha1.New() //nolint:gosec // git blob ids
	fmt.Fprintf(h, "blob %d\x00", len(b))
	h.Write(b)
	return hex.EncodeToString(h.Sum(nil))
}

func (h *fakeHub) serveHub(w http.ResponseWriter, r *http.Request) {
	h.mu.Lock()
	h.auth["hub"] = append(h.auth["hub"], r.Header.Get("Authorization"))
	status := h.status
	h.mu.Unlock()
	if rest, ok := strings.CutPrefix(r.URL.Path, "/api/models/"); ok {
		if status != 0 {
			http.Error(w, `{"error":"Repository not found"}`, status)
			return
		}
		h.serveAPI(w, r, rest)
		return
	}
	parts := strings.SplitN(strings.TrimPrefix(r.URL.Path, "/"), "/", 5)
	if len(parts) < 5 || parts[2] != "resolve" {
		http.NotFound(w, r)
		return
	}
	repo, rev, path := parts[0]+"/"+parts[1], parts[3], parts[4]
	h.mu.Lock()
	newRepo, moved := h.renamed[repo]
	files := h.repos[repo]
	h.mu.Unlock()
	if moved {
		w.Header().Set("Location", "/"+newRepo+"/resolve/"+rev+"/"+path)
		w.WriteHeader(http.StatusTemporaryRedirect)
		return
	}
	body, ok := files[path]
	if !ok || rev != h.commit {
		w.Header().Set("X-Error-Code", "EntryNotFound")
		http.NotFound(w, r)
		return
	}
	w.Header().Set("X-Repo-Commit", h.commit)
	if isLFS(path) {
		sum := sha256Hex(body)
		w.Header().Set("X-Linked-Etag", `"`+sum+`"`)
		w.Header().Set("X-Linked-Size", strconv.Itoa(len(body)))
		w.Header().Set("ETag", `"`+gitBlobID([]byte("pointer"+sum))+`"`)
		w.Header().Set("Location", h.cdn.URL+"/lfs/"+sum+"?X-Amz-Signature=secret")
		w.WriteHeader(http.StatusFound)
		return
	}
	w.Header().Set("ETag", `"`+gitBlobID(body)+`"`)
	if r.Method == http.MethodGet {
		h.mu.Lock()
		h.hubGets[path]++
		h.mu.Unlock()
	}
	h.serveBytes(w, r, body, false, 0)
}

func (h *fakeHub) serveAPI(w http.ResponseWriter, r *http.Request, rest string) {
	h.mu.Lock()
	h.apiCalls++
	h.mu.Unlock()
	parts := strings.SplitN(rest, "/", 4)
	if len(parts) < 4 {
		http.NotFound(w, r)
		return
	}
	repo, kind, rev := parts[0]+"/"+parts[1], parts[2], parts[3]
	h.mu.Lock()
	files, ok := h.repos[repo]
	pageSize := h.pageSize
	h.mu.Unlock()
	if !ok {
		http.Error(w, `{"error":"Repository not found"}`, http.StatusNotFound)
		return
	}
	switch kind {
	case "revision":
		if rev != "main" && rev != h.commit {
			http.Error(w, `{"error":"Revision not found"}`, http.StatusNotFound)
			return
		}
		writeJSON(w, map[string]any{"id": repo, "sha": h.commit})
	case "tree":
		if rev != h.commit || r.URL.Query().Get("recursive") != "true" {
			http.Error(w, `{"error":"bad tree request"}`, http.StatusBadRequest)
			return
		}
		h.mu.Lock()
		h.treeCalls++
		h.mu.Unlock()
		var paths []string
		for p := range files {
			paths = append(paths, p)
		}
		sort.Strings(paths)
		var entries []map[string]any
		dirs := map[string]bool{}
		for _, p := range paths {
			if i := strings.LastIndexByte(p, '/'); i > 0 && !dirs[p[:i]] {
				dirs[p[:i]] = true
				entries = append(entries, map[string]any{"type": "directory", "oid": "0000", "size": 0, "path": p[:i]})
			}
			b := files[p]
			e := map[string]any{"type": "file", "oid": gitBlobID(b), "size": len(b), "path": p}
			if isLFS(p) {
				e["oid"] = gitBlobID([]byte("pointer" + sha256Hex(b)))
				e["size"] = len(b)
				e["lfs"] = map[string]any{"oid": sha256Hex(b), "size": len(b), "pointerSize": 134}
			}
			entries = append(entries, e)
		}
		start, _ := strconv.Atoi(r.URL.Query().Get("cursor"))
		end := len(entries)
		if pageSize > 0 && start+pageSize < end {
			end = start + pageSize
			next := fmt.Sprintf("%s%s?recursive=true&cursor=%d", h.hub.URL, r.URL.Path, end)
			w.Header().Set("Link", fmt.Sprintf(`<%s>; rel="next"`, next))
		}
		writeJSON(w, entries[start:end])
	default:
		http.NotFound(w, r)
	}
}

func writeJSON(w http.ResponseWriter, v any) {
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(v)
}

// countingWriter counts body bytes written by CDN handlers.
type countingWriter struct {
	http.ResponseWriter
	h   *fakeHub
	run int
}

func (c countingWriter) Write(p []byte) (int, error) {
	n, err := c.ResponseWriter.Write(p)
	c.h.mu.Lock()
	c.h.cdnBytes += int64(n)
	c.h.runBytes[c.run] += int64(n)
	c.h.mu.Unlock()
	return n, err
}

func (c countingWriter) Flush() { c.ResponseWriter.(http.Flusher).Flush() }

func (h *fakeHub) serveCDN(w http.ResponseWriter, r *http.Request) {
	h.mu.Lock()
	h.auth["cdn"] = append(h.auth["cdn"], r.Header.Get("Authorization"))
	var body []byte
	found := false
	if sum, ok := strings.CutPrefix(r.URL.Path, "/lfs/"); ok {
		for _, files := range h.repos {
			for _, b := range files {
				if sha256Hex(b) == sum {
					body, found = b, true
				}
			}
		}
	} else if name, ok := strings.CutPrefix(r.URL.Path, "/dl/"); ok {
		body, found = h.dl[name]
	}
	n, run := 0, h.run
	if r.Method == http.MethodGet {
		h.cdnGets++
		n = h.cdnGets
		h.ranges = append(h.ranges, r.Header.Get("Range"))
	}
	h.mu.Unlock()
	if !found {
		http.NotFound(w, r)
		return
	}
	h.serveBytes(countingWriter{w, h, run}, r, body, true, n)
}

// serveBytes answers a GET or HEAD with Range support (unless noRange).
func (h *fakeHub) serveBytes(w http.ResponseWriter, r *http.Request, body []byte, cdn bool, n int) {
	size := int64(len(body))
	start, end := int64(0), size-1
	status := http.StatusOK
	h.mu.Lock()
	noRange := h.noRange
	fault := h.cdnFault
	h.mu.Unlock()
	if rh := r.Header.Get("Range"); rh != "" && !noRange {
		spec, ok := strings.CutPrefix(rh, "bytes=")
		a, b, ok2 := strings.Cut(spec, "-")
		s, err := strconv.ParseInt(a, 10, 64)
		if !ok || !ok2 || err != nil {
			http.Error(w, "bad range", http.StatusBadRequest)
			return
		}
		if s >= size {
			w.Header().Set("Content-Range", fmt.Sprintf("bytes */%d", size))
			w.WriteHeader(http.StatusRequestedRangeNotSatisfiable)
			return
		}
		start = s
		if b != "" {
			if e, err := strconv.ParseInt(b, 10, 64); err == nil && e < end {
				end = e
			}
		}
		status = http.StatusPartialContent
		w.Header().Set("Content-Range", fmt.Sprintf("bytes %d-%d/%d", start, end, size))
	}
	w.Header().Set("Accept-Ranges", "bytes")
	w.Header().Set("Content-Length", strconv.FormatInt(end-start+1, 10))
	if r.Method == http.MethodHead {
		w.WriteHeader(status)
		return
	}
	if cdn && fault != nil && fault(n, w, r, body, start, end) {
		return
	}
	w.WriteHeader(status)
	_, _ = w.Write(body[start : end+1])
}

// writeThenDrop writes the first k bytes of the answer and kills the connection.
func writeThenDrop(w http.ResponseWriter, status int, data []byte, k int) {
	w.WriteHeader(status)
	_, _ = w.Write(data[:k])
	w.(http.Flusher).Flush()
	panic(http.ErrAbortHandler)
}

// nextRun starts counting the bytes of a new run and returns its number.
func (h *fakeHub) nextRun() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.run++
	return h.run
}

func (h *fakeHub) bytesOfRun(run int) int64 {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.runBytes[run]
}

func (h *fakeHub) counts() (cdnGets int, cdnBytes int64, treeCalls int) {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.cdnGets, h.cdnBytes, h.treeCalls
}
