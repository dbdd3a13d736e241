// Package anthropic is the Anthropic Messages dialect of modeld's HTTP API
// (POST /v1/messages and count_tokens): its wire types, their translation
// onto the chat core's request, and the encoding of the core's events as
// Messages content blocks and SSE events. It imports only the core among the
// api packages, and its errors speak Anthropic's shape and field names.
package anthropic
