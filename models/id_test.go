package models

import (
	"errors"
	"strings"
	"testing"
)

func TestParseIDAccepts(t *testing.T) {
	for _, tc := range []struct{ in, canon, name, tag string }{
		{"tiny", "tiny", "tiny", "latest"},
		{"tiny:latest", "tiny", "tiny", "latest"},
		{"owner/model", "owner/model", "owner/model", "latest"},
		{"thebloke/qwen2.5-0.5b-instruct-gguf:q4_k_m", "thebloke/qwen2.5-0.5b-instruct-gguf:q4_k_m", "thebloke/qwen2.5-0.5b-instruct-gguf", "q4_k_m"},
		{"a/b/c/d:v1.2", "a/b/c/d:v1.2", "a/b/c/d", "v1.2"},
		{"0x/9_9", "0x/9_9", "0x/9_9", "latest"},
	} {
		id, err := ParseID(tc.in)
		if err != nil {
			t.Errorf("ParseID(%q): %v", tc.in, err)
			continue
		}
		if id.String() != tc.canon || id.Name != tc.name || id.Tag != tc.tag {
			t.Errorf("ParseID(%q) = %+v (%q), want name %q tag %q canon %q", tc.in, id, id.String(), tc.name, tc.tag, tc.canon)
		}
		back, ok := idFromManifestRel(id.manifestRel())
		if !ok || back != id {
			t.Errorf("manifest path %q of %q maps back to %+v, %v", id.manifestRel(), tc.in, back, ok)
		}
	}
}

func TestParseIDRefusesHostileNames(t *testing.T) {
	for _, tc := range []struct{ in, why string }{
		{"", "empty"},
		{"..", "'.' and '..'"},
		{".", "'.' and '..'"},
		{"a/../b", "'.' and '..'"},
		{"../etc/passwd", "'.' and '..'"},
		{"a/./b", "'.' and '..'"},
		{"/etc/passwd", "absolute path"},
		{"a//b", "empty"},
		{"a/", "empty"},
		{"a\\b", "backslash"},
		{"..\\..\\windows", "backslash"},
		{"Tiny", "uppercase"},
		{"owner/Model", "uppercase"},
		{"a\x00b", "control character"},
		{"a\nb", "control character"},
		{"a\tb", "control character"},
		{"a\x7fb", "control character"},
		{"a\u0085b", "control character"},
		{"a b", "not allowed"},
		{"a@b", "not allowed"},
		{"café", "not allowed"},
		{"a:b:c", "more than one"},
		{"a:", "tag after ':' is empty"},
		{":tag", "empty"},
		{"a:b/c", "contains '/'"},
		{"a:..", "'.' and '..'"},
		{"0..", "'..' inside a name"},
		{"org/a..b", "'..' inside a name"},
		{"a:v1..2", "'..' inside a name"},
		{"-rf", "must start"},
		{".hidden", "must start"},
		{"a/_x", "must start"},
		{"a:-x", "must start"},
		{strings.Repeat("a", 65), "limit is 64"},
		{strings.Repeat("a/", 8) + "a", "segments"},
		{strings.Repeat("abcdefgh/", 15), "limit is 128"},
		{"a\xffb", "UTF-8"},
	} {
		_, err := ParseID(tc.in)
		if err == nil {
			t.Errorf("ParseID(%q) accepted a hostile name", tc.in)
			continue
		}
		if !errors.Is(err, ErrInvalidID) {
			t.Errorf("ParseID(%q) = %v, not ErrInvalidID", tc.in, err)
		}
		if !strings.Contains(err.Error(), tc.why) {
			t.Errorf("ParseID(%q) = %q, want the message to say %q", tc.in, err, tc.why)
		}
	}
}

func TestIDFromManifestRelIgnoresStrays(t *testing.T) {
	for _, rel := range []string{"@latest.json", "a/latest.json", "a/.tmp-@latest.json-1", "a/@latest.json.tmp", "A/@latest.json", "a/@x:y.json"} {
		if id, ok := idFromManifestRel(rel); ok {
			t.Errorf("idFromManifestRel(%q) = %v, want not a manifest", rel, id)
		}
	}
}

func TestSanitizeID(t *testing.T) {
	for in, want := range map[string]string{
		"TheBloke/Qwen2.5-0.5B-Instruct-GGUF:Q4_K_M": "thebloke/qwen2.5-0.5b-instruct-gguf:q4_k_m",
		"Xenova/all-MiniLM-L6-v2":                    "xenova/all-minilm-l6-v2",
		"My Model (final)":                           "my-model--final-",
		"_x/.y":                                      "x/y",
	} {
		id, err := SanitizeID(in)
		if err != nil || id.String() != want {
			t.Errorf("SanitizeID(%q) = %q, %v; want %q", in, id.String(), err, want)
		}
	}
	if _, err := SanitizeID("///"); err == nil {
		t.Error("SanitizeID of nothing valid succeeded")
	}
}

func TestCanonical(t *testing.T) {
	for in, want := range map[string]string{"m": "m", "m:latest": "m", "o/m:q4": "o/m:q4", "o/m:latest": "o/m"} {
		if got, err := Canonical(in); err != nil || got != want {
			t.Errorf("Canonical(%q) = %q, %v, want %q", in, got, err, want)
		}
	}
	if _, err := Canonical("M:latest"); !errors.Is(err, ErrInvalidID) {
		t.Errorf("Canonical(M:latest) = %v, want ErrInvalidID", err)
	}
}
