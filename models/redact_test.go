package models

import (
	"context"
	"testing"
)

// A manifest an older modeld wrote with credentials in its source is shown
// without them.
func TestManifestSourceCredentialsRedactedOnRead(t *testing.T) {
	s := newTestStore(t)
	m, err := s.Import(context.Background(), writeTemp(t, "x.gguf", tinyGGUF(t)), ImportOptions{Name: "old/model"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	m.Source = Source{Kind: SourceURL, Ref: "https://u:p4ss@host/x.gguf", URL: "https://u:p4ss@host/x.gguf?k=v"}
	data, err := encodeManifest(m)
	if err != nil {
		t.Fatal(err)
	}
	writeFile(t, s.manifestPath(ID{Name: "old/model", Tag: DefaultTag}), data)
	got, err := s.Get("old/model")
	if err != nil {
		t.Fatal(err)
	}
	if got.Source.Ref != "https://host/x.gguf" || got.Source.URL != "https://host/x.gguf?…" {
		t.Errorf("source %+v", got.Source)
	}
}

func TestRedactURL(t *testing.T) {
	for in, want := range map[string]string{
		"https://host/x.gguf":                      "https://host/x.gguf",
		"https://u:p@host/x.gguf":                  "https://host/x.gguf",
		"https://u@host/x.gguf?sig=abc#frag":       "https://host/x.gguf?…",
		"https://cdn/lfs/abc?X-Amz-Signature=s3cr": "https://cdn/lfs/abc?…",
		"hf:org/repo:Q4_K_M":                       "hf:org/repo:Q4_K_M",
		"http://u:p@host:%zz/x?y":                  "http://host:%zz/x",
	} {
		if got := RedactURL(in); got != want {
			t.Errorf("RedactURL(%q) = %q, want %q", in, got, want)
		}
	}
}
