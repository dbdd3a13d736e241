// Package api is modeld's HTTP surface, and the one place that wires it:
// New builds the router, the access rules (access.go: hosts, origins, the
// API key, body limits, slow peers), the access log (api/accesslog), the
// runtime routes (system.go) and the packages below it:
//
//	api/core        the chat core: planning, tool and format compilation,
//	                admission and start, the one stream loop, the collection
//	                of whole answers, the task pipelines, the error mapping
//	api/openai      chat completions, completions, tokenize, embeddings
//	api/anthropic   Messages and count_tokens
//	api/ollama      /api/... (chat, generate, embed, the store routes)
//	api/responses   Responses, with its previous_response_id store
//	api/tasks       classify, rerank, summarize
//	api/store       /v1/models: list, show, delete, pull
//
// A dialect imports only the core among these; the core imports only the
// access log; TestLayout reads the tree and fails on any other import, on
// a file over 500 lines or a function over 120.
//
// How to add a dialect: make a package below api/ that imports api/core and
// no other api package, with a Register(*core.Core) that adds its routes on
// c.Engine and, with c.ErrorShapeOn, its error shape on its paths (so that
// refusals before the handler, such as access rules, unknown routes and
// panics, speak it too), and call it from New. Decode the request onto the
// internal model (a backends.Request, the messages) and name your fields
// once: the conversation's (core.ConvFields), the format's and the tools'
// (core.FieldNames), so that every refusal the core and the backend give
// speaks your words; never rewrite another dialect's messages. Check each
// tool definition with core.CheckToolDef at your own paths. Plan with
// core.NewChatPlan and core.CompileTooling before acquiring a model, so
// that bad input loads nothing; start with StartChat (or StartText for a
// raw prompt) and release the run when done. Encode the events through
// core.StreamEvents with your encoder (start, reasoning, text, tool delta,
// finish, fail): the loop handles done, cancellation, shutdown and errors
// once. Write errors with core.WriteErrorAs in your shape; the status codes
// come from the one mapping. What two dialects need in common moves into
// the core. Add an end-to-end test with the dialect's real client in
// cmd/modeld, and mayImport in layout_test.go gets the new package.
package api
