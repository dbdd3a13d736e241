package backends

import "context"

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
