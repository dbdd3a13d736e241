// Package responses is the OpenAI Responses dialect of modeld's HTTP API
// (/v1/responses): its wire types, input items (messages, function and
// custom tool calls and their outputs), the bounded in-memory store that
// previous_response_id reads, and the encoding of the core's events as
// Responses output items and SSE events. It imports only the core among the
// api packages.
package responses
