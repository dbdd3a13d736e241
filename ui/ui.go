// Package ui is modeld's Local Models page: the static files (HTML, CSS and
// JavaScript, embedded in the binary, no build step and nothing fetched from
// elsewhere) and the handler that serves them with a strict
// Content-Security-Policy. The page is a client of the daemon's public API
// like any other, under the same access rules: it lists, pulls and deletes
// models, shows the probe and what is loaded, and runs a small playground.
//
// It owns static assets only: it must not hold model state, call the store,
// the cache or a backend, or serve anything but its own files.
package ui

import (
	"bytes"
	"embed"
	"io/fs"
	"net/http"
	"strings"
	"time"
)

//go:embed static
var files embed.FS

// Prefix is the path under which the page's assets are served; the page
// itself is served at "/".
const Prefix = "/ui/"

// ContentSecurityPolicy lets the page load only its own scripts, styles and
// images and talk only to the daemon that served it: no inline script or
// style, no frames, no forms posted elsewhere.
const ContentSecurityPolicy = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; " +
	"connect-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"

// IsAsset reports whether a GET or HEAD of path is one of the page's files
// (which hold no data: everything the page shows it fetches from the API).
func IsAsset(p string) bool { return p == "/" || strings.HasPrefix(p, Prefix) }

// Handler serves the page at "/" and its assets under Prefix; any other
// path, or a file that does not exist, is 404.
func Handler() http.Handler {
	static, err := fs.Sub(files, "static")
	if err != nil {
		panic(err) // the embedded tree always has static/
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h := w.Header()
		h.Set("Content-Security-Policy", ContentSecurityPolicy)
		h.Set("X-Content-Type-Options", "nosniff")
		h.Set("X-Frame-Options", "DENY")
		h.Set("Referrer-Policy", "no-referrer")
		h.Set("Cache-Control", "no-cache")
		name := "index.html"
		if r.URL.Path != "/" {
			name = strings.TrimPrefix(r.URL.Path, Prefix)
			if name == r.URL.Path || name == "index.html" || !fs.ValidPath(name) {
				http.NotFound(w, r)
				return
			}
		}
		b, err := fs.ReadFile(static, name)
		if err != nil {
			http.NotFound(w, r)
			return
		}
		http.ServeContent(w, r, name, time.Time{}, bytes.NewReader(b))
	})
}
