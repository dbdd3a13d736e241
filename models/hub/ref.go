package hub

import (
	"github.com/modeld/modeld/models"

	"fmt"
	"net/url"
	"path"
	"strings"
)

// pullRef is a parsed pull reference.
type pullRef struct {
	raw  string
	kind models.SourceKind
	repo string   // hf: "owner/repo"
	tag  string   // hf: quantization tag ("Q4_K_M"), "" when absent
	url  *url.URL // url: the file
}

// parseRef parses a pull reference:
//
//	hf:owner/repo           an ONNX (or single-GGUF) repository on the hub
//	hf:owner/repo:Q4_K_M    the GGUF file of that quantization in a repository
//	https://host/path/x.gguf a GGUF file at a URL (http:// is accepted for local mirrors)
func parseRef(s string) (pullRef, error) {
	fail := func(format string, args ...any) (pullRef, error) {
		return pullRef{}, fmt.Errorf("%w %q: %s", models.ErrInvalidRef, shownRef(s), fmt.Sprintf(format, args...))
	}
	if len(s) > maxRefLength {
		return fail("%d bytes long, the limit is %d", len(s), maxRefLength)
	}
	if rest, ok := strings.CutPrefix(s, "hf:"); ok {
		repo, tag, _ := strings.Cut(rest, ":")
		owner, name, ok := strings.Cut(repo, "/")
		if !ok || strings.Contains(name, "/") {
			return fail("expected hf:owner/repo or hf:owner/repo:QUANT")
		}
		for _, part := range []string{owner, name} {
			if err := checkRepoPart(part); err != nil {
				return fail("%v", err)
			}
		}
		if strings.Contains(tag, ":") || (tag != "" && !models.IsQuantTag(tag)) {
			return fail("tag %q is not a GGUF quantization such as Q4_K_M, Q8_0 or F16", shown(tag))
		}
		return pullRef{raw: s, kind: models.SourceHub, repo: repo, tag: tag}, nil
	}
	if strings.HasPrefix(s, "https://") || strings.HasPrefix(s, "http://") {
		u, err := url.Parse(s)
		if err != nil {
			return fail("not a valid URL") // url's error repeats the whole URL
		}
		if u.Host == "" {
			return fail("the URL has no host")
		}
		if !strings.EqualFold(path.Ext(u.Path), ".gguf") {
			return fail("a URL pull needs a .gguf file; for ONNX models use hf:owner/repo")
		}
		return pullRef{raw: s, kind: models.SourceURL, url: u}, nil
	}
	return fail("expected hf:owner/repo[:QUANT] or an https:// URL of a .gguf file")
}

// maxRefLength bounds a pull reference (URLs included).
const maxRefLength = 4096

// shownRef is what an error may show of a reference: without credentials or
// query, and cut to 100 bytes.
func shownRef(s string) string {
	s = models.RedactURL(s)
	if len(s) > 100 {
		s = s[:100] + "…"
	}
	return s
}

// checkRepoPart validates the owner or name of a hub repository.
func checkRepoPart(p string) error {
	if p == "" || p == "." || p == ".." || len(p) > 96 {
		return fmt.Errorf("repository part %q is empty, '.', '..' or longer than 96 bytes", shown(p))
	}
	for _, r := range p {
		ok := (r >= 'a' && r <= 'z') || (r >= 'A' && r <= 'Z') || (r >= '0' && r <= '9') || r == '.' || r == '_' || r == '-'
		if !ok {
			return fmt.Errorf("a repository name has character %q (use A-Z, a-z, 0-9, '.', '_', '-')", r)
		}
	}
	return nil
}

// defaultID derives a model id from a reference: the repository (and tag or
// ONNX variant) for the hub, the file name for a URL.
func (r pullRef) defaultID(variant string) (models.ID, error) {
	switch r.kind {
	case models.SourceHub:
		tag := r.tag
		if tag == "" {
			tag = variant
		}
		if tag == "" {
			return models.SanitizeID(r.repo)
		}
		return models.SanitizeID(r.repo + ":" + tag)
	default:
		base := path.Base(r.url.Path)
		return models.SanitizeID(strings.TrimSuffix(base, path.Ext(base)))
	}
}
