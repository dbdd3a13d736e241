package main

import (
	"cmp"
	"context"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/modeld/modeld/api"
	"github.com/modeld/modeld/api/core"
	"github.com/modeld/modeld/api/responses"
	"github.com/modeld/modeld/backends"
	"github.com/modeld/modeld/backends/llama"
	"github.com/modeld/modeld/cache"
	"github.com/modeld/modeld/models/hub"
	"github.com/modeld/modeld/probe"
)

func newServeCommand(a *app) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "serve",
		Short: "Run the daemon (OpenAI-compatible HTTP API on loopback)",
		Long: `Run the daemon. It starts with no model loaded and loads each model on its
first request. Stop it with Ctrl-C or SIGTERM: it takes no new requests, gives
live ones --shutdown-grace to finish, ends the rest with an error, unloads every
model and exits (a second Ctrl-C exits at once). One daemon serves a home at a
time: a second one on the same home refuses to start and names the first.

Settings (flag > MODELD_* environment > config file > default) are listed below.
GET /v1/system shows each one's value and where it came from.` + envOnlyHelp(),
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			context.AfterFunc(ctx, stop) // a second signal has its default effect
			return a.serve(ctx)
		},
	}
	addFlags(cmd.Flags(), false)
	return cmd
}

func (a *app) serve(ctx context.Context) error {
	cfg := a.cfg
	if err := checkExposure(cfg); err != nil {
		return err
	}
	home, err := lockHome(cfg.Home)
	if err != nil {
		return err
	}
	defer func() {
		if err := home.release(); err != nil {
			a.log.Warn("releasing the home lock", "err", err)
		}
		a.log.Info("stopped")
	}()
	libs := backends.Libs{Root: cfg.LibDir}
	for _, st := range libs.Check() {
		if !st.Installed {
			a.log.Warn("runtime library missing; models of this kind cannot load until it is installed",
				"library", st.Name, "dir", st.Dir, "missing", st.Missing, "fix", st.Fix)
		}
		// scripts/bootstrap's build for this CPU: the runners started after it
		// is installed load it.
		if b := st.NativeBuild; b != nil {
			a.log.Info("native build of llama.cpp", "state", b.State, "percent", b.Percent, "log", b.Log, "message", b.Message)
		}
	}
	info := probe.Once(probeSources(cfg), cfg.ProbeTimeout)()
	for _, b := range info.Backends {
		a.log.Info("backend", "kind", b.Kind, "usable", b.Usable, "devices", b.Devices, "reason", b.Reason)
	}

	store, err := a.openStore()
	if err != nil {
		return fmt.Errorf("open the model store: %w", err)
	}
	puller, err := a.newPuller(store)
	if err != nil {
		return err
	}
	fallbacks := &gpuFallbacks{}
	metrics := newPipelineMetrics()
	rt := newRuntime(cfg, a.log, store, info, nil)
	cpuVariant := ""
	if info.Library != nil {
		cpuVariant = info.Library.CPUVariant
	}
	rt.libs, rt.loaders = libs, backendLoaders(cfg, a.log, libs, cpuVariant, fallbacks, metrics)
	loaded, err := cache.New(rt.cacheConfig(), rt.resolve, rt.load, cache.WithLogger(a.log), cache.WithListed(newStoreIDs(store).list))
	if err != nil {
		return fmt.Errorf("model cache: %w", err)
	}
	rt.cache.Store(loaded)
	defer func() {
		if cfg.RestoreModels {
			a.saveResident(loaded)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
		defer cancel()
		if err := loaded.Close(ctx); err != nil {
			a.log.Warn("unloading models at shutdown", "err", err)
		}
	}()

	srv := api.New(api.Options{
		// Chat models run on llama.cpp: its grammars check formats and tools.
		Constraints: llama.Constraints{},
		Version:     modeldVersion(),
		Probe:       info,
		Libs:        libs,
		Log:         refusedScrapeLog(a.log), // refused /metrics scrapes at a bounded rate
		Settings:    cfg.public(),
		Origins:     cfg.Origins,
		Cache:       loaded,
		Tasks:       rt.tasks, // a request of the wrong kind is refused before any load
		// Model aliases, applied in every dialect's lookup (aliases.go).
		ResolveModel: modelResolver(store, cfg.Aliases),
		Collectors:   metrics.collectors(),
		ContextCap:   cfg.contextCap(),
		// The responses store: a size of 0 keeps none.
		Responses: responses.ResponseStoreConfig{MaxEntries: cfg.ResponsesStoreEntries, MaxBytes: cmp.Or(cfg.ResponsesStoreSize, -1), Lifetime: cfg.ResponsesStoreLifetime},
		// Claude Code's attribution line: dropped unless kept (api/anthropic).
		KeepBillingHeader: cfg.KeepBillingHeader,
		// Images by http(s) URL: only when allowed, through pull's guard.
		FetchImage: remoteImages(cfg, puller),

		// Who may talk to the daemon (api/access.go).
		AllowedHosts: cfg.AllowedHosts,
		Extensions:   cfg.Extensions,
		APIKey:       cfg.APIKey,
		// GET /metrics for a scraper without the key (an endpoint picker).
		MetricsWithoutKey: cfg.MetricsWithoutKey,
	})
	srv.AddSystemSection("gpu_fallbacks", fallbacks.snapshot)
	srv.RegisterModels(core.ModelsOptions{Store: store, Puller: puller, Unloader: loaded,
		Aliases: cfg.Aliases.of, Resolve: modelResolver(store, cfg.Aliases)})
	srv.RegisterOllama(core.ModelsOptions{Store: store, Puller: puller, Unloader: loaded})

	ln, err := net.Listen("tcp", cfg.Listen)
	if err != nil {
		return fmt.Errorf("listen on %s: %w (is another modeld running? set --listen or MODELD_LISTEN)", cfg.Listen, err)
	}
	if host, _, _ := net.SplitHostPort(cfg.Listen); !loopbackHost(host) {
		a.log.Warn("listening beyond loopback: every request must carry the API key", "listen", cfg.Listen)
	}
	reqs := newRequestBase()
	hs := newHTTPServer(srv.Handler(), defaultServerTimeouts)
	hs.BaseContext = reqs.base
	errc := make(chan error, 1)
	go func() { errc <- hs.Serve(ln) }()
	if err := a.recordDaemon(ln.Addr()); err != nil {
		a.log.Warn("the CLI will not find this daemon by its home", "err", err)
	}
	defer func() {
		if err := removeDaemonRecord(cfg.Home); err != nil {
			a.log.Warn("removing the daemon's address record", "err", err)
		}
	}()
	a.log.Info("modeld listening", "addr", ln.Addr().String(), "version", modeldVersion(), "home", cfg.Home)
	restored := make(chan struct{})
	if cfg.RestoreModels {
		go func() { defer close(restored); a.restoreResident(ctx, loaded) }()
	} else {
		close(restored)
		if _, err := takeResident(cfg.Home); err != nil { // an older run's record is dropped, not kept for later
			a.log.Warn("removing the record of loaded models", "err", err)
		}
	}
	defer func() { <-restored }()

	select {
	case err := <-errc:
		return fmt.Errorf("serve: %w", err)
	case <-ctx.Done():
	}
	a.log.Info("shutting down", "grace", cfg.ShutdownGrace)
	drain(hs, reqs, cfg.ShutdownGrace, a.log)
	return nil // the deferred calls unload the models, then release the home
}

// loopbackHost reports whether a listen host is a loopback name or address.
func loopbackHost(host string) bool {
	if host == "localhost" {
		return true
	}
	a, err := netip.ParseAddr(host)
	return err == nil && a.Unmap().IsLoopback()
}

// checkExposure refuses to serve beyond loopback without an API key: there,
// anyone who can reach the address could use the models, pull and delete.
func checkExposure(cfg Config) error {
	host, _, err := net.SplitHostPort(cfg.Listen)
	if err != nil {
		return fmt.Errorf("listen address %q: %w", cfg.Listen, err)
	}
	if loopbackHost(host) || cfg.APIKey != "" {
		return nil
	}
	return fmt.Errorf("refusing to listen on %s without an API key: anyone who can reach that address could use, pull and delete models; "+
		"set a key with --api-key, MODELD_API_KEY or --api-key-file, or listen on 127.0.0.1", cfg.Listen)
}

// serverTimeouts are the http.Server's own timeouts. Reading a request body
// and writing an answer are bounded per request by the api package instead
// (api.Limits: a body that stops arriving, a peer that stops reading), because
// http.Server's WriteTimeout would cut every stream that runs longer.
type serverTimeouts struct {
	ReadHeader time.Duration // the request line and headers
	Idle       time.Duration // a kept-alive connection between requests
}

var defaultServerTimeouts = serverTimeouts{ReadHeader: 10 * time.Second, Idle: 2 * time.Minute}

// maxHeaderBytes bounds a request's line and headers.
const maxHeaderBytes = 64 << 10

func newHTTPServer(h http.Handler, t serverTimeouts) *http.Server {
	return &http.Server{
		Handler:           h,
		ReadHeaderTimeout: t.ReadHeader,
		IdleTimeout:       t.Idle,
		MaxHeaderBytes:    maxHeaderBytes,
		// ReadTimeout and WriteTimeout stay 0: see serverTimeouts.
	}
}

// remoteImages is how the daemon reads an image a request gives by URL:
// through the puller's network guard when --allow-remote-images is on,
// never otherwise.
func remoteImages(cfg Config, puller *hub.Puller) func(ctx context.Context, url string, limit int64) ([]byte, error) {
	if !cfg.AllowRemoteImages || puller == nil {
		return nil
	}
	return puller.Fetch
}
