package backends

import "context"

// templateVarsKey is the context key of a request's chat-template variables.
type templateVarsKey struct{}

// WithTemplateVars returns ctx carrying extra variables for the chat
// template (OpenAI-compatible servers' chat_template_kwargs, such as
// Qwen3's enable_thinking). A ChatTokenizer that renders Jinja templates
// passes them into the template's context; others ignore them. They ride
// on the context so that the ChatTokenizer interface stays as it is.
func WithTemplateVars(ctx context.Context, vars map[string]any) context.Context {
	if len(vars) == 0 {
		return ctx
	}
	return context.WithValue(ctx, templateVarsKey{}, vars)
}

// TemplateVars are the chat-template variables ctx carries (nil when none).
func TemplateVars(ctx context.Context) map[string]any {
	v, _ := ctx.Value(templateVarsKey{}).(map[string]any)
	return v
}

// WithThinking returns ctx asking the chat template for reasoning on or
// off (ThinkingVars). A dialect whose request says nothing about reasoning
// and that documents no default of its own does not call it, and the
// template's own default holds.
func WithThinking(ctx context.Context, on bool) context.Context {
	return context.WithValue(ctx, templateVarsKey{}, ThinkingVars(TemplateVars(ctx), on))
}

// ThinkingVars is a copy of vars with the template variables
// enable_thinking and thinking (the two names reasoning templates read)
// both set: to what vars (the request's chat_template_kwargs) sets one of
// them to, enable_thinking first, else to on.
func ThinkingVars(vars map[string]any, on bool) map[string]any {
	out := make(map[string]any, len(vars)+2)
	for k, v := range vars {
		out[k] = v
	}
	var val any = on
	if v, set := vars["thinking"]; set {
		val = v
	}
	if v, set := vars["enable_thinking"]; set {
		val = v
	}
	for _, k := range []string{"enable_thinking", "thinking"} {
		if _, set := out[k]; !set {
			out[k] = val
		}
	}
	return out
}
