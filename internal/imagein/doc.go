// Package imagein owns images as request input: it turns the bytes a client
// sent (raw, base64 or a data URL) into a bounded 8-bit RGB raster, or into a
// clear error that a handler maps to 400. Everything an image may carry is
// treated as hostile: the format is sniffed from the magic bytes (never from a
// client's media type), the container is walked and the header read before any
// pixel is decoded, and the pixel count, the byte size, the metadata size and
// the number of images per request are bounded by Limits.
//
// Accepted: PNG (8- and 16-bit; 16-bit samples are reduced to their high byte,
// gray and palette images are expanded), baseline and progressive JPEG (gray
// and YCbCr), still WebP (lossy and lossless). Alpha is dropped, not
// composited, as llama.cpp's image loader and transformers.js do. A 1×1 image
// is a valid image and is accepted: every consumer resizes it.
//
// Refused, each with its own message: zero or oversized dimensions, truncated
// or corrupt data, unknown magic, animated images (APNG, animated WebP), GIF,
// AVIF/HEIF, BMP, TIFF, CMYK/YCCK JPEG (its colours depend on a profile modeld
// does not apply), and metadata (EXIF, XMP, text chunks, ICC) over
// Limits.MaxMetadataBytes. Error texts are modeld's own: they never quote the
// decoder's message, the bytes or an address.
//
// A dialect handler calls DecodeMessages once per request, after putting each
// image in a backends.ContentPart (Data for raw bytes, URL for a data URL):
// every image part then carries its decoded Image, and the request's limits
// hold across all its messages (tool results included).
//
// Decoding is pure Go (image/png, image/jpeg, golang.org/x/image/webp): no
// native code sees an image before this package has turned it into RGB. The
// package does not resize, normalise or tokenise (the pipelines and the
// backends do), and it never fetches a URL.
package imagein
