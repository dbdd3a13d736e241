package imagein

import (
	"encoding/base64"
	"strings"
	"testing"

	"github.com/modeld/modeld/backends"
)

// TestDecodeMessages: every dialect's image shape, once in backends' parts,
// decodes through one call; the limits hold across messages (a tool result's
// images count with the user's); remote URLs are refused, not fetched.
func TestDecodeMessages(t *testing.T) {
	png := encPNG(t, pattern(3, 2))
	url := "data:image/png;base64," + base64.StdEncoding.EncodeToString(png)
	msgs := []backends.Message{
		{Role: "user", Parts: []backends.ContentPart{{Type: backends.PartText, Text: "look"}, {Type: backends.PartImage, URL: url}}},
		{Role: "tool", Parts: []backends.ContentPart{{Type: backends.PartImage, Data: png}}},
	}
	if err := DecodeMessages(msgs, DefaultLimits()); err != nil {
		t.Fatal(err)
	}
	for _, p := range []backends.ContentPart{msgs[0].Parts[1], msgs[1].Parts[0]} {
		if p.Image == nil || p.Image.Width != 3 || p.Image.Height != 2 || len(p.Image.RGB) != 18 {
			t.Fatalf("part not decoded: %+v", p.Image)
		}
	}
	if msgs[0].Parts[0].Image != nil {
		t.Fatal("a text part got an image")
	}
	// Decoding again counts the decoded images: two fit a limit of two.
	lim := DefaultLimits()
	lim.MaxImages = 2
	if err := DecodeMessages(msgs, lim); err != nil {
		t.Fatal(err)
	}
	lim.MaxImages = 1
	err := DecodeMessages(msgs, lim)
	if codeOf(err) != CodeTooMany || !strings.HasPrefix(err.Error(), "image 1: ") {
		t.Fatalf("two images under a limit of one: %v", err)
	}
	for name, c := range map[string]struct {
		part backends.ContentPart
		code string
	}{
		"https":     {backends.ContentPart{Type: backends.PartImage, URL: "https://169.254.169.254/latest/meta-data"}, CodeRemote},
		"file":      {backends.ContentPart{Type: backends.PartImage, URL: "file:///etc/shadow"}, CodeRemote},
		"empty":     {backends.ContentPart{Type: backends.PartImage}, CodeEncoding},
		"bad bytes": {backends.ContentPart{Type: backends.PartImage, Data: []byte("GIF89a....")}, CodeUnsupported},
	} {
		err := DecodeMessages([]backends.Message{{Role: "user", Parts: []backends.ContentPart{c.part}}}, DefaultLimits())
		if codeOf(err) != c.code {
			t.Errorf("%s: %v, want %s", name, err, c.code)
		}
		if err != nil && strings.Contains(err.Error(), "169.254") {
			t.Errorf("%s: error echoes the address: %v", name, err)
		}
	}
}
