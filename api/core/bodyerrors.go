package core

import (
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"reflect"
	"regexp"
	"strings"
)

// The texts of a body that does not decode, in the client's terms: the
// JSON field (as the request writes it, never a Go struct's name) and the
// JSON type it wants, never a Go type.

// keepAliveForms are the values keep_alive takes, for its errors.
const keepAliveForms = `a duration such as "5m" or "1h30m", a number of seconds, 0 to unload the model when idle, or a negative value to keep it loaded`

// typeError is the 400 of a value of the wrong JSON type.
func typeError(v any, te *json.UnmarshalTypeError) *Error {
	field := jsonFieldPath(reflect.TypeOf(v), te.Field)
	got := jsonValueName(te.Value)
	if field == "" {
		return BadRequest("", "the request body must be a JSON object, not %s", got)
	}
	f := Clip(field)
	return BadRequest(f, "invalid value for %s: want %s, got %s", Quote(field), jsonTypeName(te.Type), got)
}

// syntaxError is the 400 of a body that is not JSON, naming the field whose
// value it breaks in (a duration written without quotes, most often).
func syntaxError(body []byte, se *json.SyntaxError) *Error {
	key := ""
	if off := int(se.Offset); off > 0 && off <= len(body) {
		if m := bareValueRE.FindSubmatch(body[:off]); m != nil {
			key = string(m[1])
		}
	}
	switch key {
	case "":
		return BadRequest("", "the request body is not valid JSON: %s", Clip(se.Error()))
	case "keep_alive":
		return BadRequest("keep_alive", "invalid keep_alive: want %s (a duration is a string: \"5m\", in quotes)", keepAliveForms)
	}
	return BadRequest(Clip(key), "the value of %s is not valid JSON (a string needs quotes): %s", Quote(key), Clip(se.Error()))
}

// bareValueRE finds the key whose value a syntax error cut into: a key, a
// colon and then text that is no JSON value's start, up to the error.
var bareValueRE = regexp.MustCompile(`"([A-Za-z0-9_.-]+)"\s*:\s*[^\s"\[{,}\]][^,}\]"]*$`)

// jsonFieldPath turns the path json reports (which names embedded Go
// structs, as in SamplingFields.temperature) into the request's own path.
func jsonFieldPath(t reflect.Type, path string) string {
	if path == "" {
		return ""
	}
	var out []string
	for _, seg := range strings.Split(path, ".") {
		t = elemType(t)
		if t == nil || t.Kind() != reflect.Struct {
			out, t = append(out, seg), nil
			continue
		}
		if f, ok := t.FieldByName(seg); ok && f.Anonymous && f.Tag.Get("json") == "" {
			t = f.Type // an embedded struct: its fields are the outer object's
			continue
		}
		out = append(out, seg)
		t = fieldByJSONName(t, seg)
	}
	return strings.Join(out, ".")
}

// elemType dereferences pointers and steps into the items of slices, arrays and maps.
func elemType(t reflect.Type) reflect.Type {
	for t != nil {
		switch t.Kind() {
		case reflect.Pointer, reflect.Slice, reflect.Array, reflect.Map:
			t = t.Elem()
		default:
			return t
		}
	}
	return nil
}

// fieldByJSONName is the type of struct t's field that JSON names name.
func fieldByJSONName(t reflect.Type, name string) reflect.Type {
	for i := range t.NumField() {
		f := t.Field(i)
		tag, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		switch {
		case tag == name, tag == "" && strings.EqualFold(f.Name, name):
			return f.Type
		case f.Anonymous && tag == "":
			if ft := elemType(f.Type); ft != nil && ft.Kind() == reflect.Struct {
				if inner := fieldByJSONName(ft, name); inner != nil {
					return inner
				}
			}
		}
	}
	return nil
}

// jsonTypeName names the JSON value a Go type decodes from.
func jsonTypeName(t reflect.Type) string {
	if t == nil {
		return "another value"
	}
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if t.Implements(unmarshalerType) || reflect.PointerTo(t).Implements(unmarshalerType) {
		return "another value"
	}
	switch t.Kind() {
	case reflect.String:
		return "a string"
	case reflect.Bool:
		return "true or false"
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return "an integer"
	case reflect.Float32, reflect.Float64:
		return "a number"
	case reflect.Slice, reflect.Array:
		return "an array"
	case reflect.Struct, reflect.Map:
		return "an object"
	}
	return fmt.Sprintf("a %s value", t.Kind())
}

var unmarshalerType = reflect.TypeFor[json.Unmarshaler]()

// jsonValueName names the kind of JSON value json's error reports.
func jsonValueName(v string) string {
	switch v {
	case "string":
		return "a string"
	case "number":
		return "a number"
	case "bool":
		return "true or false"
	case "array":
		return "an array"
	case "object":
		return "an object"
	case "null":
		return "null"
	}
	if strings.HasPrefix(v, "number") {
		return "a number (" + strings.TrimSpace(strings.TrimPrefix(v, "number")) + ")"
	}
	return Clip(v)
}

// TooLarge is the 413 for a body over limit bytes.
func TooLarge(limit int64) *Error {
	return &Error{Status: http.StatusRequestEntityTooLarge, Type: "invalid_request_error", Code: "request_too_large",
		Message: fmt.Sprintf("the request body is larger than this route's limit of %d bytes", limit)}
}

// BodyReadError is the API error for a failed read of the request body: 413
// over the size limit, 408 when the body stopped arriving, nil otherwise.
func BodyReadError(err error) *Error {
	var mb *http.MaxBytesError
	if errors.As(err, &mb) {
		return TooLarge(mb.Limit)
	}
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		return &Error{Status: http.StatusRequestTimeout, Type: "invalid_request_error", Code: "request_timeout",
			Message: "the request body stopped arriving before it was complete"}
	}
	return nil
}
