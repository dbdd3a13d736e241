package hub

// shown is what an error shows of a refused reference part: at most 64
// bytes of it.
func shown(s string) string {
	if len(s) > 64 {
		return s[:64] + "…"
	}
	return s
}
