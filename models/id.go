package models

import (
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"unicode/utf8"
)

// Limits on model ids. They keep manifest paths far below any file system's
// path limit and ids readable in a table.
const (
	MaxIDLength      = 128 // whole id, tag included
	MaxSegmentLength = 64  // one name segment or the tag
	MaxSegments      = 8   // name segments joined by '/'
)

// DefaultTag is the tag of an id written without one: "foo" and "foo:latest"
// name the same model, and String drops the default tag.
const DefaultTag = "latest"

// ID is a validated model id: lowercase name segments joined by '/', and a tag.
type ID struct {
	Name string // "owner/model"
	Tag  string // never empty; DefaultTag when the id had none
}

// String returns the canonical form of the id: Name, plus ":Tag" unless the
// tag is DefaultTag.
func (id ID) String() string {
	if id.Tag == DefaultTag {
		return id.Name
	}
	return id.Name + ":" + id.Tag
}

// Canonical returns the canonical form of the model id s, ParseID(s).String():
// the one spelling of a model that the store, the cache of loaded models, the
// routes and the commands use, so that "m" and "m:latest" are the same model
// everywhere. An id ParseID refuses is an error wrapping ErrInvalidID.
func Canonical(s string) (string, error) {
	id, err := ParseID(s)
	if err != nil {
		return "", err
	}
	return id.String(), nil
}

// ParseID validates s and returns its canonical ID. Allowed: segments of
// [a-z0-9._-] starting with a letter or digit, joined by '/', then an optional
// ":tag" of the same characters. Refused, with a message that names the
// problem: empty ids and segments, "." and "..", ".." anywhere inside a
// segment (so no manifest path ever holds ".."), absolute paths, backslashes,
// uppercase, control characters, any other character, too many segments and
// ids or segments over the length limits.
func ParseID(s string) (ID, error) {
	fail := func(format string, args ...any) (ID, error) {
		return ID{}, fmt.Errorf("%w %q: %s", ErrInvalidID, shownID(s), fmt.Sprintf(format, args...))
	}
	if s == "" {
		return fail("the id is empty")
	}
	if !utf8.ValidString(s) {
		return fail("the id is not valid UTF-8")
	}
	if len(s) > MaxIDLength {
		return fail("the id is %d bytes long, the limit is %d", len(s), MaxIDLength)
	}
	for i, r := range s {
		switch {
		case r < 0x20 || r == 0x7f || (r >= 0x80 && r < 0xa0):
			return fail("control character %U at byte %d", r, i)
		case r == '\\':
			return fail("backslash at byte %d: separate segments with '/'", i)
		case r >= 'A' && r <= 'Z':
			return fail("uppercase letter %q at byte %d: ids are lowercase (try %q)", r, i, strings.ToLower(s))
		}
	}
	if strings.HasPrefix(s, "/") {
		return fail("an id is not an absolute path: remove the leading '/'")
	}
	name, tag, hasTag := strings.Cut(s, ":")
	if hasTag {
		if tag == "" {
			return fail("the tag after ':' is empty")
		}
		if strings.Contains(tag, ":") {
			return fail("more than one ':'")
		}
		if strings.Contains(tag, "/") {
			return fail("the tag %q contains '/': the tag comes last", tag)
		}
		if err := checkSegment(tag); err != nil {
			return fail("tag %q: %v", tag, err)
		}
	} else {
		tag = DefaultTag
	}
	segs := strings.Split(name, "/")
	if len(segs) > MaxSegments {
		return fail("%d segments, the limit is %d", len(segs), MaxSegments)
	}
	for i, seg := range segs {
		if seg == "" {
			return fail("segment %d is empty (leading, trailing or doubled '/')", i+1)
		}
		if err := checkSegment(seg); err != nil {
			return fail("segment %d %q: %v", i+1, seg, err)
		}
	}
	return ID{Name: name, Tag: tag}, nil
}

// shownID is what an error shows of a refused id: at most 64 bytes of it.
func shownID(s string) string {
	if len(s) > 64 {
		return s[:64] + "…"
	}
	return s
}

// checkSegment validates one name segment or a tag.
func checkSegment(seg string) error {
	if seg == "." || seg == ".." {
		return errors.New("'.' and '..' are not names")
	}
	if strings.Contains(seg, "..") {
		return errors.New("'..' inside a name is not allowed")
	}
	if len(seg) > MaxSegmentLength {
		return fmt.Errorf("%d bytes long, the limit is %d", len(seg), MaxSegmentLength)
	}
	for i := 0; i < len(seg); i++ {
		c := seg[i]
		ok := (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '.' || c == '_' || c == '-'
		if !ok {
			r, _ := utf8.DecodeRuneInString(seg[i:])
			return fmt.Errorf("character %q is not allowed (use a-z, 0-9, '.', '_', '-')", r)
		}
		if i == 0 && !((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9')) {
			return fmt.Errorf("must start with a letter or digit, not %q", c)
		}
	}
	return nil
}

// manifestRel returns the manifest path of id relative to the manifests
// directory: the name segments as directories, then "@<tag>.json". '@' is not
// allowed in segments, so a manifest file can never collide with the
// directory of a longer id.
func (id ID) manifestRel() string {
	parts := append(strings.Split(id.Name, "/"), "@"+id.Tag+".json")
	return filepath.Join(parts...)
}

// idFromManifestRel is the inverse of manifestRel; ok is false for any file
// that is not a manifest (temporary files, stray files).
func idFromManifestRel(rel string) (ID, bool) {
	rel = filepath.ToSlash(rel)
	dir, file := "", rel
	if i := strings.LastIndexByte(rel, '/'); i >= 0 {
		dir, file = rel[:i], rel[i+1:]
	}
	if dir == "" || !strings.HasPrefix(file, "@") || !strings.HasSuffix(file, ".json") {
		return ID{}, false
	}
	tag := strings.TrimSuffix(strings.TrimPrefix(file, "@"), ".json")
	id, err := ParseID(dir + ":" + tag)
	if err != nil {
		return ID{}, false
	}
	return id, true
}

// SanitizeID turns free text (a repository name, a file name) into a valid id
// when it can: lowercase, characters outside [a-z0-9._-/] replaced by '-',
// leading separators trimmed. It returns an error when nothing valid is left.
func SanitizeID(s string) (ID, error) {
	s = strings.ToLower(s)
	name, tag, hasTag := strings.Cut(s, ":")
	clean := func(v string) string {
		var b strings.Builder
		for _, r := range v {
			switch {
			case (r >= 'a' && r <= 'z') || (r >= '0' && r <= '9') || r == '.' || r == '_' || r == '-' || r == '/':
				b.WriteRune(r)
			default:
				b.WriteByte('-')
			}
		}
		segs := strings.Split(b.String(), "/")
		out := segs[:0]
		for _, seg := range segs {
			for strings.Contains(seg, "..") {
				seg = strings.ReplaceAll(seg, "..", ".")
			}
			seg = strings.TrimLeft(seg, "._-")
			if len(seg) > MaxSegmentLength {
				seg = seg[:MaxSegmentLength]
			}
			if seg != "" {
				out = append(out, seg)
			}
		}
		return strings.Join(out, "/")
	}
	name = clean(name)
	if hasTag {
		tag = strings.ReplaceAll(clean(tag), "/", "-")
		if tag != "" {
			name += ":" + tag
		}
	}
	return ParseID(name)
}
