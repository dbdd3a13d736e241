// Package ggufgen writes tiny llama-architecture GGUF models for modeld's
// tests and benchmarks: SentencePiece or byte-level BPE vocabularies with the
// ChatML markers as control tokens, an optional chat template, and
// deterministic weights from a seed; or, with ReadVocab and WriteVocabModel,
// a real tokenizer read from another GGUF (such as llama.cpp's vocabulary-only
// files) and a real chat template. It uses only the standard library and
// never loads a model; the llama backend's tests do that.
package ggufgen
