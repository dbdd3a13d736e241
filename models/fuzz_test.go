package models

import (
	"net/url"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

// validManifestJSON is a manifest as the store writes it.
const validManifestJSON = `{
  "schema_version": 1,
  "id": "org/tiny:q4_k_m",
  "format": "gguf",
  "tasks": ["chat"],
  "files": [{"path": "tiny-Q4_K_M.gguf", "digest": "sha256:d9cd8613cbb877e12793ac046656ced4ea910013923655c94d02dfc57ea2e862", "size": 12345}],
  "source": {"kind": "url", "ref": "https://u:p@host/x.gguf?sig=1", "url": "https://u:p@host/x.gguf?sig=1"},
  "created": "2025-03-01T12:00:00Z",
  "modified": "2025-03-01T12:00:00Z",
  "gguf": {"file": "tiny-Q4_K_M.gguf", "architecture": "llama", "parameters": 100, "chat_template": true}
}`

// FuzzDecodeManifest: any bytes in a manifest file are an error or a valid
// manifest that survives a round trip, never a panic; what it shows of its
// source has no credentials.
func FuzzDecodeManifest(f *testing.F) {
	f.Add([]byte(validManifestJSON))
	f.Add([]byte(validManifestJSON[:len(validManifestJSON)/2]))
	f.Add([]byte(`{"schema_version":99,"files":[{"digest":"sha256:` + strings.Repeat("a", 64) + `"}]}`))
	f.Add([]byte(`{"schema_version":1,"id":"../../etc","format":"gguf","tasks":["chat"],"files":[{"path":"../x","digest":"sha256:00","size":-1}]}`))
	f.Add([]byte(`[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]`))
	f.Add([]byte("\x00\xff"))
	f.Fuzz(func(t *testing.T, data []byte) {
		_ = manifestDigests(data)
		m, err := decodeManifest(data)
		if err != nil {
			if len(err.Error()) > 4000 { // bounded, whatever the input
				t.Fatalf("error of %d bytes", len(err.Error()))
			}
			return
		}
		id, err := ParseID(m.ID)
		if err != nil || id.String() != m.ID {
			t.Fatalf("decoded manifest with id %q: %v", m.ID, err)
		}
		for _, file := range m.Files {
			if err := checkModelPath(file.Path); err != nil {
				t.Fatalf("decoded manifest with file %q: %v", file.Path, err)
			}
			if _, err := parseDigest(file.Digest); err != nil {
				t.Fatal(err)
			}
		}
		if m.Source.Kind != SourceImport {
			for _, s := range []string{m.Source.URL, m.Source.Ref, m.Source.Endpoint} {
				if u, err := url.Parse(s); err == nil && u.User != nil {
					t.Fatalf("source %q keeps user info", s)
				}
			}
		}
		out, err := encodeManifest(m)
		if err != nil {
			t.Fatalf("a decoded manifest does not encode: %v", err)
		}
		again, err := decodeManifest(out)
		if err != nil {
			t.Fatalf("round trip: %v\n%s", err, out)
		}
		if !reflect.DeepEqual(m, again) {
			t.Fatalf("round trip changed the manifest:\n%+v\n%+v", m, again)
		}
	})
}

// FuzzParseID: an accepted id is canonical, round-trips, and its manifest
// path stays inside the manifests directory and maps back to it.
func FuzzParseID(f *testing.F) {
	for _, s := range []string{
		"org/model", "org/model:q4_k_m", "model:latest", "a/b/c/d/e/f/g/h", "../x", "/abs", "a//b", "A/b",
		"a\\b", "a:b:c", "a:", ":b", "a/.", "a/..", ".hidden", "a\x00b", "é", "a/b:c/d", strings.Repeat("a", 200),
		"a@b", "org/model:@latest", "con", "a/b.json",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		if sid, err := SanitizeID(s); err == nil {
			if _, err := ParseID(sid.String()); err != nil {
				t.Fatalf("SanitizeID(%q) = %q, which ParseID refuses: %v", s, sid, err)
			}
		}
		id, err := ParseID(s)
		if err != nil {
			if len(err.Error()) > 1200 { // bounded, whatever the input
				t.Fatalf("error of %d bytes for an input of %d", len(err.Error()), len(s))
			}
			return
		}
		if len(s) > MaxIDLength || id.Tag == "" || id.Name == "" {
			t.Fatalf("ParseID(%q) = %+v", s, id)
		}
		again, err := ParseID(id.String())
		if err != nil || again != id {
			t.Fatalf("round trip of %q: %+v, %v", s, again, err)
		}
		rel := id.manifestRel()
		if !filepath.IsLocal(rel) || strings.Contains(rel, "..") {
			t.Fatalf("manifest path %q of %q leaves the directory", rel, s)
		}
		back, ok := idFromManifestRel(rel)
		if !ok || back != id {
			t.Fatalf("idFromManifestRel(%q) = %+v, %v; want %+v", rel, back, ok, id)
		}
	})
}
