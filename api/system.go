package api

import (
	"errors"
	"net/http"

	"github.com/gin-gonic/gin"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/modeld/modeld/api/core"
	"github.com/modeld/modeld/cache"
)

// registerRuntime adds the routes that observe and steer loaded models:
// GET /metrics, POST /v1/unload, and the "loaded" section of GET /v1/system.
func (s *Server) registerRuntime() {
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	reg.MustRegister(s.opt.Collectors...)
	if s.opt.Cache != nil {
		reg.MustRegister(s.opt.Cache)
		s.AddSystemSection("loaded", func() any { return s.opt.Cache.Snapshot() })
	}
	s.Engine.GET("/metrics", gin.WrapH(promhttp.HandlerFor(reg, promhttp.HandlerOpts{})))
	s.Engine.POST("/v1/unload", s.unload)
}

// UnloadRequest asks to unload a loaded model. With Wait false it fails at once
// (409) when requests are in flight instead of waiting for them.
type UnloadRequest struct {
	Model string `json:"model"`
	Wait  *bool  `json:"wait"`
}

func (s *Server) unload(c *gin.Context) {
	var req UnloadRequest
	if err := core.DecodeJSON(c, &req); err != nil {
		core.WriteError(c, err)
		return
	}
	if req.Model == "" {
		core.WriteError(c, core.BadRequest("model", "model is required"))
		return
	}
	if s.opt.Cache == nil {
		core.WriteError(c, &core.Error{Status: http.StatusServiceUnavailable, Type: "server_error", Message: "no model runtime is configured"})
		return
	}
	wait := req.Wait == nil || *req.Wait
	err := s.opt.Cache.Unload(c.Request.Context(), req.Model, wait)
	switch {
	case errors.Is(err, cache.ErrNotLoaded):
		core.WriteError(c, &core.Error{Status: http.StatusNotFound, Type: "invalid_request_error", Code: "model_not_loaded", Message: err.Error()})
	case errors.Is(err, cache.ErrInUse):
		core.WriteError(c, &core.Error{Status: http.StatusConflict, Type: "invalid_request_error", Code: "model_in_use",
			Message: err.Error() + "; retry with wait to let in-flight requests finish"})
	case err != nil:
		core.WriteError(c, err)
	default:
		c.JSON(http.StatusOK, gin.H{"model": req.Model, "unloaded": true})
	}
}
