// Package api is modeld's HTTP surface: the dialects' wire types (OpenAI
// chat and completions, OpenAI Responses, Anthropic Messages, Ollama), the
// handlers that translate them into calls on the store, the cache and the
// pipelines, access rules, logging and limits, and the one place
// (errors.go) that maps errors to status codes. Handlers hold no model
// state of their own, and nothing here knows a backend's internals: what a
// dialect must know of the model comes from the backends contract (which
// stop string matched: Event.Stop; fill-in-the-middle: backends.Infiller;
// grammars: the backends.Constrainer cmd/modeld passes in Options).
//
// The chat core (chatcore.go, chat.go, limits.go) owns the planning of a
// generation (newChatPlan: message and prompt bounds), tool and format
// compilation (compileTooling, with the dialect's fieldNames), admission
// and start (startChat, startText, startTokens) and the collection of a
// whole answer (collect, collectChoices). A dialect decodes its request,
// translates it onto backends.Request and backends.Message, and encodes
// the events.
//
// How to add a dialect: decode the request into the internal model (a
// backends.Request, the messages, a chatCall) and name your fields once —
// the conversation's (convFields), the format's and the tools' (fieldNames)
// — so that every refusal the core and the backend give speaks your words;
// never rewrite another dialect's messages or call another dialect's
// functions. Plan with newChatPlan and compileTooling before acquiring a
// model, so that bad input loads nothing; start with startChat (or
// startText for a raw prompt) and release the run when done. Encode the
// events as your wire wants them: text, reasoning and tool-call deltas, and
// the final event's finish, Stop, usage and error (generationError; a
// cancellation during shutdown is writeCut's). Give your errors your
// dialect's shape through writeErrorAs, whose status codes come from the one
// mapping. Add an end-to-end test with the dialect's real client in
// cmd/modeld, and keep the layout test (layout_test.go) green: files of at
// most 500 lines, functions of at most 120.
package api
