package ui

import (
	"io"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"testing"
)

// TestPageNeverParsesData: the script puts what it fetches into the page as
// text only (model and file names come from disk and from the hub): no
// HTML sink is used, and the page holds no inline script, style or event
// handler that the Content-Security-Policy would block.
func TestPageNeverParsesData(t *testing.T) {
	js, err := files.ReadFile("static/app.js")
	if err != nil {
		t.Fatal(err)
	}
	for _, sink := range []string{"innerHTML", "outerHTML", "insertAdjacentHTML", "document.write", "eval(", "new Function", "DOMParser", "createContextualFragment"} {
		if strings.Contains(string(js), sink) {
			t.Errorf("app.js uses %s", sink)
		}
	}
	html, err := files.ReadFile("static/index.html")
	if err != nil {
		t.Fatal(err)
	}
	if m := regexp.MustCompile(`(?i)<script>|<style|\son[a-z]+=|style=|javascript:|(src|href)="https?:`).Find(html); m != nil {
		t.Errorf("index.html has %q, which the policy blocks or which leaves the daemon", m)
	}
}

// TestHandlerServesOnlyItsFiles: the page at "/", its assets under Prefix
// with their types and the policy, and 404 for anything else.
func TestHandlerServesOnlyItsFiles(t *testing.T) {
	h := Handler()
	for _, tc := range []struct {
		path, ctype string
		status      int
	}{
		{"/", "text/html", 200},
		{"/ui/app.js", "text/javascript", 200},
		{"/ui/style.css", "text/css", 200},
		{"/ui/icon.svg", "image/svg+xml", 200},
		{"/ui/", "", 404},
		{"/ui/index.html", "", 404},
		{"/ui/../ui.go", "", 404},
		{"/ui/nope", "", 404},
		{"/other", "", 404},
	} {
		w := httptest.NewRecorder()
		h.ServeHTTP(w, httptest.NewRequest(http.MethodGet, "http://localhost"+tc.path, nil))
		body, _ := io.ReadAll(w.Body)
		if w.Code != tc.status {
			t.Errorf("GET %s = %d, want %d", tc.path, w.Code, tc.status)
			continue
		}
		if w.Header().Get("Content-Security-Policy") != ContentSecurityPolicy || w.Header().Get("X-Content-Type-Options") != "nosniff" {
			t.Errorf("GET %s: headers %v", tc.path, w.Header())
		}
		if tc.status == 200 && (!strings.HasPrefix(w.Header().Get("Content-Type"), tc.ctype) || len(body) == 0) {
			t.Errorf("GET %s: Content-Type %q, %d bytes", tc.path, w.Header().Get("Content-Type"), len(body))
		}
	}
}
