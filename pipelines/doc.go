// Package pipelines runs Hugging Face ONNX models (the folders transformers.js
// loads: config.json, tokenizer.json, tokenizer_config.json, onnx/*.onnx) as task
// pipelines: embed, classify, zero-shot classify, rerank and summarize, and on
// image models (preprocessor_config.json instead of a tokenizer) image
// classification and image embeddings. Each request goes through preprocess
// (tokenize and pad, or resize, crop, rescale and normalize) -> forward (one
// backend call per batch) -> postprocess (pool, normalize, softmax, decode).
//
// The package owns the task semantics. It does not choose devices (the caller
// decides Options.UseGPU from the per-task GPU allowlist and the probe), cache
// pipelines, decode image files (internal/imagein does, and hands over RGB), or
// speak HTTP. Text-to-ids lives in the tokenizer subpackage, ONNX Runtime in
// backends/onnx.
//
// # Semantics
//
// Results equal transformers.js 4.3.1's on the same files (testdata/onnx/goldens,
// made by scripts/goldens/pipelines): embeddings and probabilities within 1e-5,
// the same labels, the same generated ids. Where modeld decides:
//
//   - Truncation is transformers.js's: to model_max_length (capped by
//     max_position_embeddings) after special tokens are added, so a truncated
//     BERT input loses its final [SEP]. Long texts are truncated, never refused.
//   - Embeddings: pooling and normalization default to the model's
//     sentence-transformers files (modules.json, 1_Pooling/config.json); without
//     them, mean pooling and no normalization. last_token pooling takes the last
//     non-padding token (transformers.js takes the last padded position, which
//     differs for right-padded batches of unequal lengths). Dimensions truncates
//     and re-normalizes.
//   - Classification: softmax, or sigmoid when config.json says problem_type
//     multi_label_classification; labels from id2label.
//   - Zero-shot: transformers.js's zero-shot-classification (hypothesis template
//     "This example is {}.", multi_label softmaxes contradiction vs entailment per
//     label, otherwise entailment logits across labels).
//   - Rerank: (query, document) pairs through a single-logit cross-encoder;
//     relevance_score is sigmoid(logit) (RawScores: the logit), as
//     sentence-transformers' CrossEncoder reports it.
//   - Summarize: greedy search is transformers.js's (same logits processors, same
//     stopping). transformers.js has no beam search (num_beams > 1 runs greedy
//     search there); modeld's is Hugging Face transformers' BeamSearchScorer,
//     checked against a reference implementation in the goldens script. The
//     decoder length is capped by max_position_embeddings.
//   - Images: transformers.js's ImageProcessor steps and order (resize by size
//     or shortest/longest edge, center crop with black padding, rescale,
//     normalize, each stored as float32), with its Node resampler (sharp's
//     affine: corner-aligned, black beyond the edge, libvips's 8-bit
//     fixed-point bilinear and bicubic). Crops, unresized images and
//     bilinear resizes whose inverse scale is a multiple of 1/64 give
//     pixel_values equal to transformers.js's within 1e-6; other resizes are
//     within one 8-bit level in a few percent of values.
//     Options modeld does not implement (do_pad, thumbnails, lanczos, ...)
//     refuse the model at load. Image classification is softmax, as
//     transformers.js's image-classification; an image embedding is the
//     model's image_embeds (a CLIP-style onnx/vision_model.onnx), else
//     pooler_output, else the first token of last_hidden_state, normalized
//     only when asked.
//
// # Batching
//
// Concurrent requests on one encoder pipeline are merged by a Batcher into one
// forward pass bounded by a padded-token budget and a short wait window, and split
// back. A summarization call batches its own texts (texts × beams rows); separate
// calls run side by side. Every result names the device that ran it.
package pipelines
