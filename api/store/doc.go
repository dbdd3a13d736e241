// Package store holds the model store routes of modeld's HTTP API: the
// OpenAI-shaped model list with modeld's additions (tasks, sizes, disk use,
// aliases), one model, delete (unloading first) and pull with NDJSON
// progress. It reads and changes the store only through models.Store and
// hub.Puller, and imports only the core among the api packages.
package store
