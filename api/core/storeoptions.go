package core

import (
	"context"

	"github.com/modeld/modeld/models"
	"github.com/modeld/modeld/models/hub"
)

// ModelUnloader unloads a model before the store deletes it; *cache.Cache
// implements it. With wait it waits for in-flight requests; without, it fails
// with cache.ErrInUse while any hold or wait for the model, and with
// cache.ErrNotLoaded when the model is not loaded.
type ModelUnloader interface {
	Unload(ctx context.Context, id string, wait bool) error
}

// ModelsOptions are the dependencies of the model routes.
type ModelsOptions struct {
	Store    *models.Store
	Puller   *hub.Puller   // nil: POST /v1/models/pull is refused
	Unloader ModelUnloader // nil: no model is ever loaded
	// Aliases, when set, lists the alias patterns that name model id
	// (--model-aliases), shown as each model's aliases; Resolve is
	// Options.ResolveModel, so GET /v1/models/{alias} answers its model.
	Aliases func(id string) []string
	Resolve func(name string) string
}
