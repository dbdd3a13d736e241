// Package openai is the OpenAI dialect of modeld's HTTP API: chat
// completions, completions, tokenize and detokenize, and embeddings. It
// decodes a request onto the chat core's internal model (backends.Request,
// backends.Message), names its own fields once, and encodes the events as
// OpenAI's JSON and SSE chunks. It imports only the core among the api
// packages; it holds no model state and knows no backend's internals.
package openai
