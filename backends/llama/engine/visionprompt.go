package engine

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"slices"
	"strings"
	"sync"

	yz "github.com/hybridgroup/yzma/pkg/llama"

	"github.com/modeld/modeld/backends"
)

// withImageMarkers is msgs with each image part written into its message's
// content as marker, and the images in order. A message whose content is
// its text parts joined (as the dialects make it) gets the markers where
// its image parts stand among them; one whose content is given apart gets
// them before it.
func withImageMarkers(msgs []Message, marker string) ([]Message, []*backends.Image) {
	out := make([]Message, len(msgs))
	var imgs []*backends.Image
	for i, msg := range msgs {
		out[i] = msg
		var joined, marked, marks strings.Builder
		n := 0
		for _, p := range msg.Parts {
			switch p.Type {
			case backends.PartText:
				joined.WriteString(p.Text)
				marked.WriteString(p.Text)
			case backends.PartImage:
				marked.WriteString(marker)
				marks.WriteString(marker)
				imgs = append(imgs, p.Image)
				n++
			}
		}
		if n == 0 {
			continue
		}
		if joined.String() == msg.Content {
			out[i].Content = marked.String()
		} else {
			out[i].Content = marks.String() + msg.Content
		}
	}
	return out, imgs
}

// newImageMarker draws a marker that no text of msgs holds.
func newImageMarker(msgs []Message) string {
	for {
		var b [8]byte
		_, _ = rand.Read(b[:])
		mk := "mdimg" + hex.EncodeToString(b[:]) + "x"
		clash := false
		for _, msg := range msgs {
			if strings.Contains(msg.Content, mk[5:]) {
				clash = true
				break
			}
		}
		if !clash {
			return mk
		}
	}
}

// tokenizeWithImages is tokenizeSegments for a prompt with images: segs
// are cut at marker, each piece tokenized as tokenizeSegments does, and
// each image's tokens (backends.ImageToken where the image stands) go
// between. The template must have rendered each image once.
func (m *Model) tokenizeWithImages(ctx context.Context, sp *specials, segs []segment, marker string, imgs []*backends.Image) ([]int32, error) {
	groups := [][]segment{nil}
	for _, sg := range segs {
		for i, piece := range strings.Split(sg.text, marker) {
			if i > 0 {
				groups = append(groups, nil)
			}
			if piece != "" {
				groups[len(groups)-1] = append(groups[len(groups)-1], segment{text: piece, markup: sg.markup})
			}
		}
	}
	if len(groups)-1 != len(imgs) {
		return nil, fmt.Errorf("%w: the chat template rendered %d of the request's %d images (it drops or repeats message content)", ErrTemplate, len(groups)-1, len(imgs))
	}
	var out []int32
	if yz.VocabGetAddBOS(m.vocab) && m.info.BOS >= 0 {
		out = append(out, m.info.BOS)
	}
	text := func(s string) ([]int32, error) { return m.TokenizeContext(ctx, s, false, false) }
	for i, g := range groups {
		ids, err := sp.tokenize(g, text)
		if err != nil {
			return nil, err
		}
		out = append(out, ids...)
		if i == len(imgs) {
			break
		}
		u, err := m.vis.tokenizeImage(imgs[i], false)
		if err != nil {
			return nil, err
		}
		out = append(out, u.flat...)
	}
	if yz.VocabGetAddEOS(m.vocab) && m.info.EOS >= 0 {
		out = append(out, m.info.EOS)
	}
	return out, nil
}

// mediaPrompt is a prompt with images as the scheduler evaluates it: text
// runs and image units in order.
type mediaPrompt struct {
	vis    *vision
	pieces []mediaPiece
	once   sync.Once
}

// mediaPiece is a run of text tokens, or one image (unit set).
type mediaPiece struct {
	tokens []yz.Token
	unit   *imageUnit
}

// release frees the images' native chunks; safe to call more than once.
func (mp *mediaPrompt) release() {
	if mp == nil {
		return
	}
	mp.once.Do(func() {
		for _, pc := range mp.pieces {
			if pc.unit != nil {
				mp.vis.free(pc.unit)
			}
		}
	})
}

// errImagesMismatch: the prompt's image tokens are not the request's images'.
func errImagesMismatch(what string) error {
	return &backends.BadRequestError{Param: "messages",
		Message: "the prompt's image tokens do not match the images of the request's messages: " + what}
}

// newMediaPrompt pairs prompt's image tokens with the images of msgs, in
// order: each image, tokenized again, must stand in prompt whole (its
// projector's text tokens around its image tokens), and no image token may
// be left over. nil, nil when neither has images.
func (m *Model) newMediaPrompt(prompt []int32, msgs []Message) (*mediaPrompt, error) {
	var imgs []*backends.Image
	for _, msg := range msgs {
		for _, p := range msg.Parts {
			if p.Type == backends.PartImage {
				imgs = append(imgs, p.Image)
			}
		}
	}
	marked := backends.PromptImageTokens(prompt)
	if len(imgs) == 0 && marked == 0 {
		return nil, nil
	}
	if m.vis == nil {
		return nil, &backends.ImageInputError{Images: max(len(imgs), 1), Reason: m.info.VisionOff}
	}
	if marked == 0 {
		return nil, errImagesMismatch(fmt.Sprintf("the prompt has none for %d image(s)", len(imgs)))
	}
	mp := &mediaPrompt{vis: m.vis}
	at := 0
	for k, img := range imgs {
		u, err := m.vis.tokenizeImage(img, true)
		if err != nil {
			mp.release()
			return nil, err
		}
		mp.pieces = append(mp.pieces, mediaPiece{unit: u}) // owned by mp from here
		first := at
		for first < len(prompt) && prompt[first] != backends.ImageToken {
			first++
		}
		start := first - u.lead
		if first == len(prompt) || start < at || start+len(u.flat) > len(prompt) || !slices.Equal(prompt[start:start+len(u.flat)], u.flat) {
			mp.release()
			return nil, errImagesMismatch(fmt.Sprintf("image %d's %d tokens are not where the prompt has them", k+1, u.images))
		}
		if start > at {
			mp.pieces = append(mp.pieces[:len(mp.pieces)-1], mediaPiece{tokens: toTokens(prompt[at:start])}, mediaPiece{unit: u})
		}
		at = start + len(u.flat)
	}
	if backends.PromptImageTokens(prompt[at:]) > 0 {
		mp.release()
		return nil, errImagesMismatch(fmt.Sprintf("it has more image tokens than the %d image(s) give", len(imgs)))
	}
	if at < len(prompt) {
		mp.pieces = append(mp.pieces, mediaPiece{tokens: toTokens(prompt[at:])})
	}
	return mp, nil
}

func toTokens(ids []int32) []yz.Token {
	out := make([]yz.Token, len(ids))
	for i, t := range ids {
		out[i] = yz.Token(t)
	}
	return out
}
