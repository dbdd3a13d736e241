package toolcall

// status is the outcome of matching a piece of grammar against a prefix of
// the output: it matched, the input ended before it could tell (more), the
// text is not this piece (no), or the text is this piece but malformed
// (bad).
type status int

const (
	stOK status = iota
	stMore
	stNo
	stBad
)

func isWS(c byte) bool { return c == ' ' || c == '\t' || c == '\n' || c == '\r' }

func skipWS(s string, i int) int {
	for i < len(s) && isWS(s[i]) {
		i++
	}
	return i
}

// lit matches the literal want at s[i:].
func lit(s string, i int, want string) (int, status) {
	rest := s[i:]
	if len(rest) >= len(want) {
		if rest[:len(want)] == want {
			return i + len(want), stOK
		}
		return i, stNo
	}
	if want[:len(rest)] == rest {
		return i, stMore
	}
	return i, stNo
}

// scanString scans a JSON string starting at s[i] == '"'.
func scanString(s string, i int) (int, status) {
	if i >= len(s) {
		return i, stMore
	}
	if s[i] != '"' {
		return i, stBad
	}
	i++
	for i < len(s) {
		c := s[i]
		switch {
		case c == '"':
			return i + 1, stOK
		case c < 0x20:
			return i, stBad
		case c == '\\':
			if i+1 >= len(s) {
				return i, stMore
			}
			switch s[i+1] {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
				i += 2
			case 'u':
				for k := 0; k < 4; k++ {
					if i+2+k >= len(s) {
						return i, stMore
					}
					if !isHex(s[i+2+k]) {
						return i + 2 + k, stBad
					}
				}
				i += 6
			default:
				return i + 1, stBad
			}
		default:
			i++
		}
	}
	return i, stMore
}

func isHex(c byte) bool {
	return c >= '0' && c <= '9' || c >= 'a' && c <= 'f' || c >= 'A' && c <= 'F'
}

func isDigit(c byte) bool { return c >= '0' && c <= '9' }

// scanNumber scans a JSON number. A number that runs to the end of the
// input is stMore: more digits could follow.
func scanNumber(s string, i int) (int, status) {
	j := i
	if j < len(s) && s[j] == '-' {
		j++
	}
	if j >= len(s) {
		return i, stMore
	}
	switch {
	case s[j] == '0':
		j++
	case isDigit(s[j]):
		for j < len(s) && isDigit(s[j]) {
			j++
		}
	default:
		return j, stBad
	}
	if j < len(s) && s[j] == '.' {
		j++
		if j >= len(s) {
			return i, stMore
		}
		if !isDigit(s[j]) {
			return j, stBad
		}
		for j < len(s) && isDigit(s[j]) {
			j++
		}
	}
	if j < len(s) && (s[j] == 'e' || s[j] == 'E') {
		j++
		if j < len(s) && (s[j] == '+' || s[j] == '-') {
			j++
		}
		if j >= len(s) {
			return i, stMore
		}
		if !isDigit(s[j]) {
			return j, stBad
		}
		for j < len(s) && isDigit(s[j]) {
			j++
		}
	}
	if j >= len(s) {
		return i, stMore
	}
	return j, stOK
}

// scanValue scans one JSON value at s[i] (no leading whitespace) and
// returns the index just past it. It keeps its own stack, so deep nesting
// cannot exhaust the goroutine stack.
func scanValue(s string, i int) (int, status) {
	var stack []byte
	for {
		// A value is expected at i.
		if i >= len(s) {
			return i, stMore
		}
		var st status
		switch c := s[i]; {
		case c == '{' || c == '[':
			i = skipWS(s, i+1)
			if i >= len(s) {
				return i, stMore
			}
			if c == '{' && s[i] == '}' || c == '[' && s[i] == ']' {
				i++
				break
			}
			stack = append(stack, c)
			if c == '{' {
				if i, st = scanKey(s, i); st != stOK {
					return i, st
				}
			}
			continue
		case c == '"':
			i, st = scanString(s, i)
		case c == '-' || isDigit(c):
			i, st = scanNumber(s, i)
		case c == 't':
			i, st = scanLit(s, i, "true")
		case c == 'f':
			i, st = scanLit(s, i, "false")
		case c == 'n':
			i, st = scanLit(s, i, "null")
		default:
			return i, stBad
		}
		if st != stOK {
			return i, st
		}
		// A value ended at i: close containers or move to the next member.
	after:
		for {
			if len(stack) == 0 {
				return i, stOK
			}
			i = skipWS(s, i)
			if i >= len(s) {
				return i, stMore
			}
			top := stack[len(stack)-1]
			switch {
			case s[i] == ',':
				i = skipWS(s, i+1)
				if top == '{' {
					var st status
					if i, st = scanKey(s, i); st != stOK {
						return i, st
					}
				}
				if i >= len(s) {
					return i, stMore
				}
				break after
			case top == '{' && s[i] == '}' || top == '[' && s[i] == ']':
				stack = stack[:len(stack)-1]
				i++
			default:
				return i, stBad
			}
		}
	}
}

// scanKey scans `"key" :` and the whitespace after it.
func scanKey(s string, i int) (int, status) {
	i, st := scanString(s, i)
	if st != stOK {
		return i, st
	}
	i = skipWS(s, i)
	if i >= len(s) {
		return i, stMore
	}
	if s[i] != ':' {
		return i, stBad
	}
	return skipWS(s, i+1), stOK
}

func scanLit(s string, i int, word string) (int, status) {
	j, st := lit(s, i, word)
	if st == stNo {
		for j = i; j < len(s) && s[j] == word[j-i]; j++ {
		}
		return j, stBad // the first byte that differs
	}
	return j, st
}
