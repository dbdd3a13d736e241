package grammar

import (
	"encoding/json"
	"fmt"
	"math/big"
	"strings"
)

// maxMagnitude bounds integers the digit-range rules produce (18 digits
// fit an int64).
var maxMagnitude = big.NewInt(999999999999999999)

// bound reads a numeric keyword as a rational.
func bound(s *object, k, path string) (*big.Rat, bool, error) {
	v, ok := s.get(k)
	if !ok {
		return nil, false, nil
	}
	n, ok := v.(json.Number)
	if !ok {
		return nil, false, &InvalidError{Path: path + "/" + k, Reason: k + " must be a number"}
	}
	r, ok := new(big.Rat).SetString(n.String())
	if !ok {
		return nil, false, &InvalidError{Path: path + "/" + k, Reason: k + " must be a number"}
	}
	return r, true, nil
}

// intBounds returns the inclusive integer range the bounds allow; ok is
// false when there are no bounds.
func intBounds(s *object, path string) (lo, hi *big.Int, ok bool, err error) {
	lo = new(big.Int).Neg(maxMagnitude)
	hi = new(big.Int).Set(maxMagnitude)
	apply := func(k string, isMin, exclusive bool) error {
		r, has, err := bound(s, k, path)
		if err != nil || !has {
			return err
		}
		ok = true
		if isMin {
			v := ceilRat(r)
			if exclusive && new(big.Rat).SetInt(v).Cmp(r) == 0 {
				v.Add(v, big.NewInt(1))
			}
			if v.Cmp(lo) > 0 {
				lo = v
			}
		} else {
			v := floorRat(r)
			if exclusive && new(big.Rat).SetInt(v).Cmp(r) == 0 {
				v.Sub(v, big.NewInt(1))
			}
			if v.Cmp(hi) < 0 {
				hi = v
			}
		}
		return nil
	}
	// Draft 4 spells exclusivity as a boolean beside minimum/maximum.
	exMin, _ := s.get("exclusiveMinimum")
	exMax, _ := s.get("exclusiveMaximum")
	if err := apply("minimum", true, exMin == true); err != nil {
		return nil, nil, false, err
	}
	if err := apply("maximum", false, exMax == true); err != nil {
		return nil, nil, false, err
	}
	if _, isBool := exMin.(bool); !isBool {
		if err := apply("exclusiveMinimum", true, true); err != nil {
			return nil, nil, false, err
		}
	}
	if _, isBool := exMax.(bool); !isBool {
		if err := apply("exclusiveMaximum", false, true); err != nil {
			return nil, nil, false, err
		}
	}
	if lo.Cmp(hi) > 0 {
		return nil, nil, false, &InvalidError{Path: path, Reason: "the bounds admit no value the grammar can produce"}
	}
	return lo, hi, ok, nil
}

func ceilRat(r *big.Rat) *big.Int {
	q, m := new(big.Int).DivMod(r.Num(), r.Denom(), new(big.Int))
	if m.Sign() != 0 {
		q.Add(q, big.NewInt(1)) // DivMod floors (Euclidean, positive denominator)
	}
	return q
}

func floorRat(r *big.Rat) *big.Int {
	q, _ := new(big.Int).DivMod(r.Num(), r.Denom(), new(big.Int))
	return q
}

func (c *converter) visitInteger(s *object, path string) (string, error) {
	if _, ok := s.get("multipleOf"); ok {
		return "", &UnsupportedError{Keyword: "multipleOf", Path: path}
	}
	if err := numberFormat(s, path, "int32", "int64"); err != nil {
		return "", err
	}
	lo, hi, ok, err := intBounds(s, path)
	if err != nil {
		return "", err
	}
	if f, _ := s.get("format"); f == "int32" {
		if lo.Cmp(big.NewInt(-1<<31)) < 0 {
			lo.SetInt64(-1 << 31)
		}
		if hi.Cmp(big.NewInt(1<<31-1)) > 0 {
			hi.SetInt64(1<<31 - 1)
		}
		ok = true
		if lo.Cmp(hi) > 0 {
			return "", &InvalidError{Path: path, Reason: "the bounds admit no int32"}
		}
	}
	if !ok {
		return c.prim("integer"), nil
	}
	return c.rule(path+"-integer", "("+intRange(lo.Int64(), hi.Int64())+") "+c.prim("space"))
}

// visitNumber supports bounds that are whole numbers with a minimum of zero
// or more: the integer part is bounded, the fraction free below the maximum.
func (c *converter) visitNumber(s *object, path string) (string, error) {
	if err := numberFormat(s, path, "float", "double"); err != nil {
		return "", err
	}
	has := false
	for _, k := range []string{"minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum"} {
		if _, ok := s.get(k); ok {
			has = true
		}
	}
	if !has {
		return c.prim("number"), nil
	}
	for _, k := range []string{"minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum"} {
		r, ok, err := bound(s, k, path)
		if err != nil {
			return "", err
		}
		if ok && (!r.IsInt() || r.Sign() < 0) {
			return "", &UnsupportedError{Keyword: k, Path: path, Reason: "number bounds must be whole numbers of zero or more"}
		}
		if ok && r.Num().Cmp(big.NewInt(1e15)) > 0 {
			return "", &UnsupportedError{Keyword: k, Path: path, Reason: "number bound too large"}
		}
	}
	if _, ok := s.get("minimum"); !ok {
		if _, ok := s.get("exclusiveMinimum"); !ok {
			return "", &UnsupportedError{Keyword: "maximum", Path: path, Reason: "a number maximum needs a minimum of zero or more"}
		}
	}
	lo, hi, _, err := intBounds(s, path)
	if err != nil {
		return "", err
	}
	if lo.Sign() < 0 {
		lo.SetInt64(0)
	}
	frac := `("." [0-9]{1,15})?`
	exHi := false
	if v, ok := s.get("exclusiveMaximum"); ok && v != false {
		exHi = true
	}
	if hi.Cmp(maxMagnitude) == 0 {
		hi.SetInt64(999999999999999)
	} else if exHi {
		hi.Add(hi, big.NewInt(1)) // integer bound: any fraction below it
	}
	var alts []string
	// Integer parts strictly below hi take any fraction; hi itself only
	// zeros, unless hi is excluded.
	if lo.Cmp(hi) < 0 {
		alts = append(alts, "("+intRange(lo.Int64(), hi.Int64()-1)+") "+frac)
	}
	if !exHi {
		alts = append(alts, lit(hi.String())+` ("." "0"{1,15})?`)
	}
	if len(alts) == 0 {
		return "", &InvalidError{Path: path, Reason: "the bounds admit no value the grammar can produce"}
	}
	return c.rule(path+"-number", "("+strings.Join(alts, " | ")+") "+c.prim("space"))
}

// numberFormat accepts the OpenAPI number formats the grammar keeps to
// (int32 is bounded by the caller; the others hold every value produced).
func numberFormat(s *object, path string, allowed ...string) error {
	f, ok := s.get("format")
	if !ok {
		return nil
	}
	for _, a := range allowed {
		if f == a {
			return nil
		}
	}
	return &UnsupportedError{Keyword: "format", Path: path, Reason: fmt.Sprintf("format %v is not enforced on numbers (supported: %s)", f, strings.Join(allowed, ", "))}
}
