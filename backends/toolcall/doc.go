// Package toolcall recognises a model's tool-call format from its chat
// template and reads tool calls out of the text the model generates:
// complete (Parse) and as it streams (Stream), with the family's call
// markers as triggers for a lazy grammar (Family.Triggers).
//
// It owns the formats of the families listed with Family and the rule
// that splits an output into content and calls. It works on text only:
// it must not render templates, build grammars, sample or know a backend;
// the backend that generates feeds it text and turns its deltas into
// events.
package toolcall
