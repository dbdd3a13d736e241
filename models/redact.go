package models

import (
	"net/url"
	"strings"
)

// RedactURL drops the user info (credentials), the query (pre-signed CDN
// URLs carry credentials there) and the fragment: what errors, progress
// events, logs and manifests may show of a URL.
func RedactURL(s string) string {
	u, err := url.Parse(s)
	if err != nil {
		// Not a URL: keep what comes before any credentials or query.
		if i := strings.IndexAny(s, "?#"); i >= 0 {
			s = s[:i]
		}
		if i := strings.LastIndexByte(s, '@'); i >= 0 {
			if j := strings.Index(s, "://"); j >= 0 && j < i {
				s = s[:j+3] + s[i+1:]
			}
		}
		return s
	}
	hadQuery := u.RawQuery != "" || u.ForceQuery
	if u.User == nil && !hadQuery && !strings.Contains(s, "#") {
		return s // nothing to drop: keep the text as it was
	}
	u.User, u.RawQuery, u.ForceQuery, u.Fragment, u.RawFragment = nil, "", false, "", ""
	out := u.String()
	if hadQuery {
		out += "?…"
	}
	return out
}
