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
