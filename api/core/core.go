package core

import (
	"context"
	"log/slog"

	"github.com/gin-gonic/gin"

	"github.com/modeld/modeld/backends"
	"github.com/modeld/modeld/cache"
)

// Options are what every dialect's handlers read of the daemon's
// settings and dependencies.
type Options struct {
	// Constraints compiles response formats and tool choices into grammars;
	// nil refuses structured output.
	Constraints backends.Constrainer
	Version     string
	// ContextCap is the largest context in tokens a chat model gets (0:
	// llama.DefaultContextCap).
	ContextCap int
	// Cache finds or loads the model a request names.
	Cache *cache.Cache
	// Tasks gives the tasks a model serves from its canonical id without
	// loading it; nil leaves every check to the cache.
	Tasks func(id string) ([]string, error)
	// ResolveModel gives the store model a request's name means (aliases).
	ResolveModel func(name string) string
	// KeepBillingHeader keeps Claude Code's billing line in the system prompt.
	KeepBillingHeader bool
	// FetchImage, when set, reads an image a request gives by http(s) URL,
	// at most limit bytes, through the pull's network guard
	// (--allow-remote-images); nil refuses such images.
	FetchImage func(ctx context.Context, url string, limit int64) ([]byte, error)
}

// Core is the handle a dialect gets: the settings, the log, the router its
// routes go on, and the error shapes of the dialects' paths. The chat core's
// operations (planning, admission, start, collection) are its methods.
type Core struct {
	Opt    Options
	Log    *slog.Logger
	Engine *gin.Engine
	shapes []pathShape
}

// New is the core over engine; log must not be nil.
func New(opt Options, log *slog.Logger, engine *gin.Engine) *Core {
	return &Core{Opt: opt, Log: log, Engine: engine}
}
