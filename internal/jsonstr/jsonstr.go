// Package jsonstr appends JSON strings byte for byte as encoding/json writes
// them, for the hand-written encoders of what is sent once per generated
// token (the runner's event line, the daemon's server-sent chunks), which
// must not pay for reflection. It owns string escaping only: the encoders
// that use it lay out their own objects and test their bytes against
// encoding/json's.
package jsonstr

import "unicode/utf8"

const hex = "0123456789abcdef"

// Append appends s as a JSON string, as encoding/json writes it: invalid
// UTF-8 becomes U+FFFD, U+2028 and U+2029 are escaped, so are control
// characters, '"' and '\\', and with escapeHTML (json.Marshal's default)
// '<', '>' and '&' too.
func Append(b []byte, s string, escapeHTML bool) []byte {
	b = append(b, '"')
	start := 0
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			if c >= 0x20 && c != '"' && c != '\\' && (!escapeHTML || (c != '<' && c != '>' && c != '&')) {
				i++
				continue
			}
			b = append(b, s[start:i]...)
			switch c {
			case '"', '\\':
				b = append(b, '\\', c)
			case '\b':
				b = append(b, '\\', 'b')
			case '\f':
				b = append(b, '\\', 'f')
			case '\n':
				b = append(b, '\\', 'n')
			case '\r':
				b = append(b, '\\', 'r')
			case '\t':
				b = append(b, '\\', 't')
			default:
				b = append(b, '\\', 'u', '0', '0', hex[c>>4], hex[c&0xf])
			}
			i++
			start = i
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 {
			b = append(b, s[start:i]...)
			b = append(b, `\ufffd`...)
			i += size
			start = i
			continue
		}
		if r == '\u2028' || r == '\u2029' {
			b = append(b, s[start:i]...)
			b = append(b, '\\', 'u', '2', '0', '2', hex[r&0xf])
			i += size
			start = i
			continue
		}
		i += size
	}
	b = append(b, s[start:]...)
	return append(b, '"')
}
