package models

import "net/http"

// Error is the type of the package's sentinel errors. HTTPStatus tells the
// api package which status an error means without models importing it.
type Error struct {
	msg    string
	status int
}

func (e *Error) Error() string { return e.msg }

// HTTPStatus is the HTTP status that best describes the error.
func (e *Error) HTTPStatus() int { return e.status }

// Errors callers can test with errors.Is. Every error the package returns
// wraps at most one of them, with the detail in the message.
var (
	// ErrNotFound: no model with that id in the store.
	ErrNotFound = &Error{"model not found", http.StatusNotFound}
	// ErrExists: an import would overwrite a model (pass Replace).
	ErrExists = &Error{"model already exists", http.StatusConflict}
	// ErrInvalidID: a model id that ParseID refuses.
	ErrInvalidID = &Error{"invalid model id", http.StatusBadRequest}
	// ErrInvalidModel: the files are not a usable model (corrupt or truncated
	// GGUF, ONNX folder without the files its task needs, bad --task).
	ErrInvalidModel = &Error{"invalid model", http.StatusUnprocessableEntity}
	// ErrInvalidRef: a pull reference the store cannot parse.
	ErrInvalidRef = &Error{"invalid pull reference", http.StatusBadRequest}
	// ErrOffline: offline mode is on and the operation needs the network.
	ErrOffline = &Error{"offline mode is on: network access refused", http.StatusForbidden}
	// ErrRemoteNotFound: the hub or server has no such repository, revision or file.
	ErrRemoteNotFound = &Error{"not found on the remote", http.StatusNotFound}
	// ErrUnauthorized: the hub refused the request (private or gated
	// repository, missing or wrong token; set HF_TOKEN).
	ErrUnauthorized = &Error{"access refused by the remote (private or gated repository? set HF_TOKEN)", http.StatusBadGateway}
	// ErrChecksum: downloaded bytes did not match the published sha256, on
	// every attempt.
	ErrChecksum = &Error{"checksum mismatch", http.StatusBadGateway}
)
