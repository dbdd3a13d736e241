// Package core is the chat core every dialect of modeld's HTTP API stands
// on. It owns the Core handle (the settings, the log, the router and the
// error shapes of the dialects' paths); the planning of a generation
// (NewChatPlan: message and prompt bounds); the fields every dialect shares
// and their checks (SamplingFields, KeepAlive, speculative); the rule of a
// tool definition (CheckToolDef, at the dialect's paths); tool, tool_choice
// and format compilation (CompileTooling, with the dialect's FieldNames);
// admission and start (StartChat, StartText, StartTokens); the one loop over
// a generation's events (StreamEvents, which calls a dialect's encoder); the
// collection of a whole answer (Collect, CollectChoices); the task
// pipelines' acquisition; and the one mapping of errors to status codes
// (errors.go), written in each dialect's shape.
//
// It must not know any dialect's wire: no route, field name or shape of a
// dialect lives here, and it imports no dialect (TestLayout in package api
// checks). What two dialects share moves here.
package core
