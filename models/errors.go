package models

import "errors"

// Errors callers can test with errors.Is. Every error the package returns
// wraps at most one of them, with the detail in the message.
var (
	// ErrNotFound: no model with that id in the store.
	ErrNotFound = errors.New("model not found")
	// ErrExists: an import would overwrite a model (pass Replace).
	ErrExists = errors.New("model already exists")
	// ErrInvalidModel: the files are not a usable model (corrupt or truncated
	// GGUF, ONNX folder without the files its task needs, bad --task).
	ErrInvalidModel = errors.New("invalid model")
	// ErrInvalidRef: a pull reference the store cannot parse.
	ErrInvalidRef = errors.New("invalid pull reference")
	// ErrOffline: offline mode is on and the operation needs the network.
	ErrOffline = errors.New("offline mode is on: network access refused")
	// ErrRemoteNotFound: the hub or server has no such repository, revision or file.
	ErrRemoteNotFound = errors.New("not found on the remote")
	// ErrUnauthorized: the hub refused the request (private or gated repository,
	// missing or wrong token).
	ErrUnauthorized = errors.New("access refused by the remote")
	// ErrChecksum: downloaded bytes did not match the published sha256, on
	// every attempt.
	ErrChecksum = errors.New("checksum mismatch")
	// ErrBusy: a lock could not be taken because another operation holds it.
	ErrBusy = errors.New("store is busy")
)
