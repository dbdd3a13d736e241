package hub

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/modeld/modeld/models"
)

// TestFetchGuarded: a URL a request names (a remote image) is fetched
// through the pull's guard: loopback by address or by name, and a redirect
// to loopback, are refused unless private targets are allowed; a body over
// the limit is an error.
func TestFetchGuarded(t *testing.T) {
	secret := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/hop" {
			http.Redirect(w, r, "http://127.0.0.1:"+strings.Split(r.Host, ":")[1]+"/secret", http.StatusFound)
			return
		}
		_, _ = w.Write([]byte("the router's admin page"))
	}))
	defer secret.Close()
	port := strings.Split(secret.URL, ":")[2]
	store, err := models.Open(t.TempDir(), models.Options{})
	if err != nil {
		t.Fatal(err)
	}
	guarded, err := NewPuller(store, PullConfig{})
	if err != nil {
		t.Fatal(err)
	}
	for _, u := range []string{secret.URL + "/secret", "http://localhost:" + port + "/secret", "http://[::ffff:127.0.0.1]:" + port + "/"} {
		if b, err := guarded.Fetch(context.Background(), u, 1<<20); !errors.Is(err, models.ErrPrivateTarget) {
			t.Errorf("%s: got %q, %v; want ErrPrivateTarget", u, b, err)
		}
	}
	if _, err := guarded.Fetch(context.Background(), "file:///etc/passwd", 1<<20); err == nil {
		t.Error("a file: URL was fetched")
	}
	open, err := NewPuller(store, PullConfig{AllowPrivate: true})
	if err != nil {
		t.Fatal(err)
	}
	if b, err := open.Fetch(context.Background(), secret.URL+"/hop", 1<<20); err != nil || string(b) != "the router's admin page" {
		t.Errorf("allowed: %q, %v", b, err)
	}
	if _, err := open.Fetch(context.Background(), secret.URL+"/secret", 5); err == nil || !strings.Contains(err.Error(), "over 5 bytes") {
		t.Errorf("limit: %v", err)
	}
}
