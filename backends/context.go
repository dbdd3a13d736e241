package backends

// EffectiveContext is the one rule for the context, in tokens, that one
// sequence of a chat model gets: the configured limit (DefaultContextCap
// unless configured), or the model's trained context when that is known
// (> 0) and smaller. A limit <= 0 means no limit: the trained context. The
// daemon's placement, the backend that loads the model and the model list
// shown to clients all call it, so that they agree on the number.
func EffectiveContext(trained, limit int) int {
	switch {
	case limit <= 0:
		return max(trained, 0)
	case trained > 0 && trained < limit:
		return trained
	default:
		return limit
	}
}
