package grammar

import (
	"strconv"
	"strings"
)

// intRange is a GBNF expression matching exactly the JSON integers in
// [lo, hi] (no leading zeros, no "-0"). |lo| and |hi| stay below 10^18.
func intRange(lo, hi int64) string {
	var alts []string
	if lo < 0 {
		nhi := hi
		if nhi > -1 {
			nhi = -1
		}
		alts = append(alts, `"-" (`+natRange(-nhi, -lo)+")")
	}
	if hi >= 0 {
		nlo := lo
		if nlo < 0 {
			nlo = 0
		}
		alts = append(alts, natRange(nlo, hi))
	}
	return strings.Join(alts, " | ")
}

// natRange matches the naturals in [lo, hi], 0 <= lo <= hi.
func natRange(lo, hi int64) string {
	a, b := strconv.FormatInt(lo, 10), strconv.FormatInt(hi, 10)
	var alts []string
	for n := len(a); n <= len(b); n++ {
		from, to := a, b
		if n > len(a) {
			from = "1" + strings.Repeat("0", n-1)
		}
		if n < len(b) {
			to = strings.Repeat("9", n)
		}
		alts = append(alts, sameLength(from, to))
	}
	return strings.Join(alts, " | ")
}

// sameLength matches the digit strings from a to b, of equal length.
func sameLength(a, b string) string {
	if a == b {
		return lit(a)
	}
	if len(a) == 1 {
		return "[" + a + "-" + b + "]"
	}
	if a[0] == b[0] {
		return lit(a[:1]) + " (" + sameLength(a[1:], b[1:]) + ")"
	}
	n := len(a) - 1
	restA, restB := a[1:], b[1:]
	lo, hi := a[0], b[0]
	var alts []string
	if restA != strings.Repeat("0", n) {
		alts = append(alts, lit(a[:1])+" ("+sameLength(restA, strings.Repeat("9", n))+")")
		lo++
	}
	var tail string
	if restB != strings.Repeat("9", n) {
		tail = lit(b[:1]) + " (" + sameLength(strings.Repeat("0", n), restB) + ")"
		hi--
	}
	if lo <= hi {
		d := "[" + string(lo) + "-" + string(hi) + "]"
		if lo == hi {
			d = lit(string(lo))
		}
		alts = append(alts, d+" [0-9]{"+strconv.Itoa(n)+"}")
	}
	if tail != "" {
		alts = append(alts, tail)
	}
	return strings.Join(alts, " | ")
}
