// Package tasks holds modeld's own task routes on the HTTP API:
// /v1/classify (with zero-shot labels), /v1/rerank (also on the paths other
// rerank servers use) and /v1/summarize. Each decodes its request, acquires
// its pipeline through the core and answers JSON (or SSE for a streamed
// summary). It imports only the core among the api packages.
package tasks
