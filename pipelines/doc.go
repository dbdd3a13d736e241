// Package pipelines runs Hugging Face ONNX models (the folders transformers.js
// loads: config.json, tokenizer.json, onnx/*.onnx) as task pipelines: embed,
// classify, zero-shot classify, rerank and summarize. Each request goes through
// preprocess (tokenize, pad into tensors) -> forward (one backend call per batch)
// -> postprocess (pool, normalize, softmax, decode), with results numerically equal
// to transformers.js 4.3.1 on the same files (the goldens under testdata say how
// equal).
//
// Concurrent requests on one encoder pipeline are merged by a Batcher into one
// forward pass bounded by a padded-token budget and a short wait window. Every
// result names the device that ran it.
//
// The package owns the task semantics; it does not choose devices (the caller
// decides UseGPU from configuration and the probe), cache pipelines, or speak HTTP.
// Text-to-ids lives in the tokenizer subpackage, ONNX Runtime in backends/onnx.
package pipelines
