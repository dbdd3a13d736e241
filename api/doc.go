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
// The chat core (chatcore.go, chat.go, fields.go, tooldefs.go, limits.go)
// owns the planning of a generation (newChatPlan: message and prompt
// bounds), the fields every dialect shares and their checks (samplingFields,
// keep_alive, speculative), the rule of a tool definition (checkToolDef,
// with the dialect's paths), tool and format compilation (compileTooling,
// with the dialect's fieldNames), admission
// and start (startChat, startText, startTokens) and the collection of a
// whole answer (collect, collectChoices). A dialect decodes its request,
// translates it onto backends.Request and backends.Message, and encodes
// the events. A dialect's files are named after it (openai*.go,
// anthropic*.go, ollama*.go, responses*.go): none uses another dialect's
// declarations, and the core uses theirs only where it wires them (the
// routes; coreWiring in layout_dialects_test.go, which checks both). That is the step before each
// dialect becomes a package below api/, which TestLayout forbids to import
// another.
//
// How to add a dialect: decode the request into the internal model (a
// backends.Request, the messages, a chatCall) and name your fields once —
// the conversation's (convFields), the format's and the tools' (fieldNames)
// — so that every refusal the core and the backend give speaks your words;
// never rewrite another dialect's messages or call another dialect's
// functions; what two dialects share moves into the core. Check each tool
// definition with checkToolDef at your own paths. Plan with newChatPlan and compileTooling before acquiring a
// model, so that bad input loads nothing; start with startChat (or
// startText for a raw prompt) and release the run when done. Encode the
// events as your wire wants them: text, reasoning and tool-call deltas, and
// the final event's finish, Stop, usage and error (generationError; a
// cancellation during shutdown is writeCut's). Give your errors your
// dialect's shape through writeErrorAs, whose status codes come from the one
// mapping, and name your paths' shape with errorShapeOn as you register
// your routes, so that refusals before your handler (access rules, unknown
// routes, panics) speak it too. Add an end-to-end test with the dialect's real client in
// cmd/modeld, and keep the layout tests (layout_test.go,
// layout_dialects_test.go) green: files of at most 500 lines, functions of
// at most 120, no use of another dialect's files.
package api
