package main

import (
	"context"
	"log/slog"

	"github.com/modeld/modeld/backends"
	"github.com/modeld/modeld/cache"
)

// backendLoaders returns the loader of each backend, keyed by cache.Spec.Backend.
func backendLoaders(cfg Config, log *slog.Logger, libs backends.Libs) map[string]func(context.Context, cache.Spec, *loadPlan) (cache.Instance, error) {
	return map[string]func(context.Context, cache.Spec, *loadPlan) (cache.Instance, error){}
}
