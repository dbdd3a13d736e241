// Package toolcall recognises a model's tool-call format from its chat
// template and reads tool calls out of the text the model generates:
// complete (Parse) and as it streams (Stream), with the family's call
// markers as triggers for a lazy grammar (Family.Triggers).
//
// It owns the formats of the families listed with Family and the rule
// that splits an output into content and calls. It works on text only:
// it must not render templates, build grammars, sample or know a backend;
// the backend that generates feeds it text (control tokens such as
// [TOOL_CALLS] or <|python_tag|> rendered as text) and turns its deltas
// into events. Reasoning (<think>...</think>) is not split off here: a
// caller removes it first, or it stays content.
//
// # Content and calls
//
// A call section begins where a family's marker does (or, for Llama3,
// FunctionaryV32 and Generic, at the start of the output). Everything
// outside sections is content, with these rules:
//
//   - Whitespace right before a section, and from a section's end up to the
//     next content (or the end), is dropped.
//   - A marker followed by text that is not a call of the family (the XML
//     call forms after <tool_call>, "Action:" without a JSON block, a
//     marker at the very end) is content, marker included.
//   - A marker followed by a call that turns malformed is an error
//     (*SyntaxError): the calls before it and the part of it already
//     generated are returned, the text after it is dropped.
//   - An output that ends inside a call gives ErrIncomplete with the calls,
//     the last one's arguments as far as they were generated.
//
// Arguments are the JSON object's text exactly as generated (or the
// object a JSON string member held, for models that quote it). A call's
// ID comes from an IDFunc by its index in the output, so a caller can
// make the streamed and the complete parse agree on IDs.
//
// # Streaming
//
// Stream's deltas concatenate to Parse's result for every way of cutting
// the text into pieces: text that could be the start of a marker is held
// until it is known not to be one, a call's first delta (ID and name)
// comes when its name is complete, and its arguments follow as they are
// generated. Each Feed rescans from the last point where everything was
// decided (the end of the last call, or released content), so content
// costs linear time and a call costs time quadratic in its own length
// only.
package toolcall
