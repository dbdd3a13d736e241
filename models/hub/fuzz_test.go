package hub

import (
	"github.com/modeld/modeld/models"

	"net/url"
	"strings"
	"testing"
)

// FuzzParseRef: any pull reference is refused or parsed into an http(s) URL
// or a valid hub repository; errors are short and show no credentials.
func FuzzParseRef(f *testing.F) {
	for _, s := range []string{
		"hf:org/repo", "hf:org/repo:Q4_K_M", "hf:org/repo:", "hf:../x", "hf:org/repo/extra", "hf:org",
		"https://host/x.gguf", "http://127.0.0.1:8080/x.gguf", "https://user:secretpw@host/x.gguf?sig=abc",
		"https://host/x.bin", "https:///x.gguf", "ftp://host/x.gguf", "https://[::1]/x.gguf", "http://%zz/x.gguf",
		"https://host/x.gguf#frag", "https://u:p@h:99999/x.gguf", strings.Repeat("hf:", 2000),
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		shown := models.RedactURL(s)
		if u, err := url.Parse(shown); err == nil && u.User != nil {
			t.Fatalf("models.RedactURL(%q) = %q keeps user info", s, shown)
		}
		r, err := parseRef(s)
		if err != nil {
			if len(err.Error()) > 1200 { // bounded, whatever the input
				t.Fatalf("error of %d bytes", len(err.Error()))
			}
			if u, perr := url.Parse(s); perr == nil && u.User != nil {
				if pw, ok := u.User.Password(); ok && len(pw) >= 4 && strings.Contains(err.Error(), pw) {
					t.Fatalf("error shows the password: %v", err)
				}
			}
			return
		}
		switch r.kind {
		case models.SourceHub:
			owner, name, ok := strings.Cut(r.repo, "/")
			if !ok || checkRepoPart(owner) != nil || checkRepoPart(name) != nil {
				t.Fatalf("parseRef(%q) repo %q", s, r.repo)
			}
		case models.SourceURL:
			if r.url == nil || r.url.Host == "" || (r.url.Scheme != "http" && r.url.Scheme != "https") {
				t.Fatalf("parseRef(%q) url %v", s, r.url)
			}
		default:
			t.Fatalf("parseRef(%q) kind %q", s, r.kind)
		}
		if id, err := r.defaultID(""); err == nil {
			if _, err := models.ParseID(id.String()); err != nil {
				t.Fatalf("default id %q of %q: %v", id, s, err)
			}
		}
	})
}
