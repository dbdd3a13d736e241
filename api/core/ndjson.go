package core

import (
	"encoding/json"
	"net/http"
)

// NdjsonWriter writes one JSON value per line and flushes it, so that a
// client sees each event as it happens. encoding/json escapes every control
// character inside strings, so no value can end its line early or add one.
type NdjsonWriter struct {
	w   http.ResponseWriter
	enc *json.Encoder
}

func NewNDJSONWriter(w http.ResponseWriter) *NdjsonWriter {
	return &NdjsonWriter{w: w, enc: json.NewEncoder(w)}
}

// Send writes v as one line. Its error is that of the connection: a client
// that went away cancels the request's context, which ends the work.
func (n *NdjsonWriter) Send(v any) error {
	err := n.enc.Encode(v)
	if f, ok := n.w.(http.Flusher); ok {
		f.Flush()
	}
	return err
}
