package api

import (
	"context"
	"log/slog"
	"net/http"
	"time"

	"github.com/gin-gonic/gin"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/modeld/modeld/api/accesslog"
	"github.com/modeld/modeld/api/anthropic"
	"github.com/modeld/modeld/api/core"
	"github.com/modeld/modeld/api/ollama"
	"github.com/modeld/modeld/api/openai"
	"github.com/modeld/modeld/api/responses"
	"github.com/modeld/modeld/api/store"
	"github.com/modeld/modeld/api/tasks"
	"github.com/modeld/modeld/backends"
	"github.com/modeld/modeld/cache"
	"github.com/modeld/modeld/probe"
	"github.com/modeld/modeld/ui"
)

// Options are the server's dependencies and settings, built by cmd/modeld.
type Options struct {
	// Constraints compiles response formats and tool choices into the
	// grammars the chat backend samples under (llama.Constraints); nil
	// refuses structured output.
	Constraints backends.Constrainer
	Version     string
	Probe       probe.Info
	Libs        backends.Libs
	Log         *slog.Logger
	// Settings is the effective configuration shown by /v1/system (no secrets).
	Settings any
	// Origins are browser origins allowed in addition to loopback pages and
	// browser extensions ("*" allows every origin but "null").
	Origins []string
	// AllowedHosts are Host header names (or addresses, any port) served in
	// addition to loopback names and addresses and the address a connection
	// arrived on.
	AllowedHosts []string
	// Extensions restricts browser-extension origins to these ids (or full
	// origins such as chrome-extension://ID); empty allows every extension.
	Extensions []string
	// APIKey, when set, is required on every route (access.go). It is kept only
	// as a hash.
	APIKey string
	// MetricsWithoutKey serves GET /metrics without the API key (for a
	// gateway's endpoint picker, which scrapes without credentials).
	MetricsWithoutKey bool
	// Limits bound request bodies and slow peers; zero fields take defaults.
	Limits Limits
	// ContextCap is the largest context in tokens that a chat model gets
	// (--context-size; 0: llama.DefaultContextCap). Chat requests that cannot
	// fit in it are refused before any model is loaded (limits.go).
	ContextCap int
	// Cache finds or loads the model a request names.
	Cache *cache.Cache
	// Tasks, when set, gives the tasks a model serves (the store's names,
	// backends.TaskChat, ...) from its canonical id without loading it, so
	// that a request of the wrong kind is refused before the model is loaded
	// or queued for. An error leaves the answer to the cache.
	Tasks func(id string) ([]string, error)
	// ResolveModel, when set, gives the store model a request's model name
	// means: the name itself, or the model an alias (--model-aliases) maps
	// it to. Every dialect's lookup goes through it before the cache, so an
	// alias and its model share one loaded instance.
	ResolveModel func(name string) string
	// Collectors are more metrics for GET /metrics.
	Collectors []prometheus.Collector
	// Responses bounds the store that previous_response_id reads
	// (responses_store.go); zero fields take its defaults.
	Responses responses.ResponseStoreConfig
	// FetchImage, when set, reads images that requests give by http(s) URL
	// (--allow-remote-images, through the pull's network guard); nil refuses
	// them.
	FetchImage func(ctx context.Context, url string, limit int64) ([]byte, error)
	// KeepBillingHeader keeps the x-anthropic-billing-header line that
	// Claude Code puts first in its system prompt; by default the Messages
	// dialect drops it, so that a new session reuses the cached prompt of
	// the last one (anthropic.go).
	KeepBillingHeader bool
}

// Server routes modeld's HTTP API.
type Server struct {
	*core.Core
	opt     Options
	access  *access
	handler http.Handler // guard(engine)
	started time.Time
	// system collects sections that other parts add to GET /v1/system.
	system map[string]func() any
}

// New builds the router. Further route groups are added with the Register* methods
// before Handler is served.
func New(opt Options) *Server {
	gin.SetMode(gin.ReleaseMode)
	if opt.Log == nil {
		opt.Log = slog.Default()
	}
	c := core.New(core.Options{Constraints: opt.Constraints, Version: opt.Version, ContextCap: opt.ContextCap, Cache: opt.Cache,
		Tasks: opt.Tasks, ResolveModel: opt.ResolveModel, KeepBillingHeader: opt.KeepBillingHeader, FetchImage: opt.FetchImage}, opt.Log, gin.New())
	s := &Server{Core: c, opt: opt, started: time.Now(), system: map[string]func() any{}, access: newAccess(opt)}
	s.opt.APIKey = ""
	s.handler = s.guard(s.Engine)
	s.Engine.HandleMethodNotAllowed = true
	s.Engine.Use(s.ShapeErrors, s.recoverer, accesslog.Middleware(s.Log))
	s.Engine.NoRoute(func(c *gin.Context) {
		core.WriteError(c, &core.Error{Status: http.StatusNotFound, Type: "invalid_request_error", Code: "not_found",
			Message: "no route for " + c.Request.Method + " " + c.Request.URL.Path})
	})
	s.Engine.NoMethod(func(c *gin.Context) {
		core.WriteError(c, &core.Error{Status: http.StatusMethodNotAllowed, Type: "invalid_request_error", Code: "method_not_allowed",
			Message: c.Request.Method + " is not allowed on " + c.Request.URL.Path})
	})
	s.Engine.GET("/health", s.health)
	s.Engine.HEAD("/health", s.health)
	page := gin.WrapH(ui.Handler()) // the Local Models page: static files, a client of this API
	for _, p := range []string{"/", ui.Prefix + "*file"} {
		s.Engine.GET(p, page)
		s.Engine.HEAD(p, page)
	}
	s.Engine.GET("/v1/system", s.systemInfo)
	openai.Register(c)
	tasks.Register(c)
	s.registerRuntime()
	anthropic.Register(c)
	responses.Register(c, opt.Responses)
	return s
}

// RegisterModels adds the model store routes (GET /v1/models, GET and
// DELETE /v1/models/{id}, POST /v1/models/pull; see the store routes).
func (s *Server) RegisterModels(o core.ModelsOptions) { store.Register(s.Core, o) }

// RegisterOllama adds Ollama's routes. o gives the store routes (tags, show,
// pull, delete, copy) their store and puller, as RegisterModels does.
func (s *Server) RegisterOllama(o core.ModelsOptions) { ollama.Register(s.Core, o) }

// Handler is the http.Handler to serve: the access rules, then the routes.
func (s *Server) Handler() http.Handler { return s.handler }

// AddSystemSection adds a key to GET /v1/system whose value f computes per request.
func (s *Server) AddSystemSection(key string, f func() any) { s.system[key] = f }

func (s *Server) health(c *gin.Context) {
	c.JSON(http.StatusOK, gin.H{"status": "ok"})
}

func (s *Server) systemInfo(c *gin.Context) {
	out := gin.H{
		"version":   s.opt.Version,
		"uptime":    time.Since(s.started).Round(time.Second).String(),
		"probe":     s.opt.Probe,
		"libraries": s.opt.Libs.Check(),
		"config":    s.opt.Settings,
	}
	for k, f := range s.system {
		out[k] = f()
	}
	c.JSON(http.StatusOK, out)
}

func (s *Server) recoverer(c *gin.Context) {
	defer func() {
		if r := recover(); r != nil {
			s.Log.Error("handler panic", "method", c.Request.Method, "path", c.Request.URL.Path, "panic", r)
			if !c.Writer.Written() {
				core.WriteError(c, &core.Error{Status: http.StatusInternalServerError, Type: "server_error", Message: "internal error"})
			}
			c.Abort()
		}
	}()
	c.Next()
}
