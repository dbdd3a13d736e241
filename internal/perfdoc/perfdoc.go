// Package perfdoc edits docs/PERFORMANCE.md for the benchmark scripts: each
// benchmark owns one "## " section and rewrites only that one.
package perfdoc

import "strings"

// Title is what an empty document starts with.
const Title = "# Performance\n\nMeasured figures of modeld against named peers, each with the command that reproduces it.\n"

// UpdateSection replaces the section of doc that starts with the line heading
// and runs to the next "## " heading (or the end) with body, or appends body
// when doc has no such section. An empty doc gets Title first.
func UpdateSection(doc, heading, body string) string {
	body = strings.TrimRight(body, "\n") + "\n"
	if strings.TrimSpace(doc) == "" {
		doc = Title
	}
	lines := strings.SplitAfter(doc, "\n")
	start := -1
	for i, l := range lines {
		if strings.TrimRight(l, "\r\n") == heading {
			start = i
			break
		}
	}
	if start < 0 {
		return strings.TrimRight(doc, "\n") + "\n\n" + body
	}
	end := len(lines)
	for i := start + 1; i < len(lines); i++ {
		if strings.HasPrefix(lines[i], "## ") {
			end = i
			break
		}
	}
	rest := strings.Join(lines[end:], "")
	if rest != "" {
		body += "\n"
	}
	return strings.Join(lines[:start], "") + body + rest
}
