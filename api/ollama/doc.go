// Package ollama is Ollama's dialect of modeld's HTTP API (/api/...): chat,
// generate (with fill-in-the-middle through the backend's Infiller),
// embeddings, and Ollama's store routes (tags, show, ps, pull, delete, copy,
// version). Requests run through the chat core, the core's task pipelines
// or the store; answers are Ollama's NDJSON objects. It imports only the core
// among the api packages.
package ollama
