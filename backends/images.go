package backends

import (
	"context"
	"fmt"
	"net/http"
)

// Image is one decoded input image: 8-bit RGB, row-major, Width*Height*3
// bytes. internal/imagein makes them from what a client sent, within its
// limits; a backend never sees encoded image bytes.
type Image struct {
	Format        string // "png", "jpeg" or "webp": what the bytes were
	Width, Height int
	RGB           []byte
	// Digest is the SHA-256 of the encoded bytes (a cache key).
	Digest [32]byte
	// EncodedBytes is the size of the encoded file.
	EncodedBytes int
}

// Image task names.
const (
	TaskImageClassify = "image-classify" // an image classifier (ViT-style)
	TaskImageEmbed    = "image-embed"    // an image encoder's vectors (ViT pooled output, CLIP image_embeds)
)

// MaxImageInputs bounds the images of one image task call.
const MaxImageInputs = 256

// ImageEmbedder turns images into vectors. EmbedOptions.Pooling does not
// apply (the model's pooled output is the vector); Normalize and Dimensions do.
type ImageEmbedder interface {
	EmbedImages(ctx context.Context, images []*Image, opts EmbedOptions) (EmbedResult, error)
	Dimensions() int
}

// ImageClassifier scores images against the model's own labels.
type ImageClassifier interface {
	ClassifyImages(ctx context.Context, images []*Image, opts ClassifyOptions) (ClassifyResult, error)
}

// ImageInputError says that a model cannot read the images a request sent:
// a text-only model, or a chat model loaded without its multimodal
// projector. It is the client's 400 (errors.Is ErrInvalidRequest), with the
// code image_input_unsupported.
type ImageInputError struct {
	Model  string // the model's name as the request gave it ("" when unknown)
	Images int    // the images sent
	Param  string // the request field holding them ("messages"); "" leaves it to the caller
	// Reason, when set, says why a model imported with a projector reads
	// no images (the multimodal library is not installed); "" is the
	// model having no projector.
	Reason string `json:",omitempty"`
}

func (e *ImageInputError) Error() string {
	who := "the model"
	if e.Model != "" {
		who = "model " + QuoteInput(e.Model)
	}
	why := "it has no multimodal projector"
	if e.Reason != "" {
		why = e.Reason
	}
	return fmt.Sprintf("%s does not accept image input (%s), and the request has %d image(s)", who, why, e.Images)
}

func (e *ImageInputError) Is(target error) bool { return target == ErrInvalidRequest }
func (e *ImageInputError) HTTPStatus() int      { return http.StatusBadRequest }
func (e *ImageInputError) ErrorCode() string    { return "image_input_unsupported" }
func (e *ImageInputError) ErrorParam() string   { return e.Param }

// ImageToken stands for one image token in a prompt's token ids: a model
// that reads images (a llama model with its projector) gives a chat prompt
// with images as its text tokens around one run of ImageToken per image, as
// long as the image's tokens, so that the prompt's length is its exact
// token count. Such a prompt is generated from with the same messages (the
// images are taken from their parts, in order); ImageToken is never a
// vocabulary id and detokenizes to nothing.
const ImageToken int32 = -1

// PromptImageTokens is how many of prompt's ids are image tokens.
func PromptImageTokens(prompt []int32) int {
	n := 0
	for _, t := range prompt {
		if t == ImageToken {
			n++
		}
	}
	return n
}

// CountImages is the number of image parts in msgs.
func CountImages(msgs []Message) int {
	n := 0
	for _, m := range msgs {
		for _, p := range m.Parts {
			if p.Type == PartImage {
				n++
			}
		}
	}
	return n
}
