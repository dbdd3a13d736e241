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
	// ErrPrivateTarget: a pull would connect to a loopback, link-local,
	// private, shared (CGNAT), multicast or unspecified address, and
	// PullConfig.AllowPrivate is off.
	ErrPrivateTarget = &Error{"pull refused: the target is a loopback, link-local or private network address (allow it with --allow-private-pull)", http.StatusForbidden}
	// ErrTooLarge: a file of a pull is larger than PullConfig.MaxDownload.
	ErrTooLarge = &Error{"download larger than the size bound (--max-download)", http.StatusUnprocessableEntity}
	// ErrNoSpace: the store's file system has not enough free space (checked
	// before a download, or ENOSPC while writing). It is never retried; the
	// partial file stays and a later pull continues it.
	ErrNoSpace = &Error{"not enough free disk space in the model store", http.StatusInsufficientStorage}
	// ErrCorruptManifest: a manifest file that is not valid JSON or not a
	// valid manifest. Remove and Prune delete it.
	ErrCorruptManifest = &Error{"model manifest is corrupt", http.StatusInternalServerError}
	// ErrCorruptBlob: a model file's bytes do not match its digest (found by
	// Verify or before a load). Pull the model again, or remove it.
	ErrCorruptBlob = &Error{"model file does not match its digest", http.StatusInternalServerError}
)
