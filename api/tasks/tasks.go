package tasks

import "github.com/modeld/modeld/api/core"

// tasksAPI are modeld's own task routes: classification, reranking (also
// on the paths other rerank servers use) and summarization.
type tasksAPI struct{ *core.Core }

// Register adds the task routes.
func Register(c *core.Core) {
	s := &tasksAPI{c}
	s.Engine.POST("/v1/classify", s.classify)
	s.Engine.POST("/v1/rerank", s.rerank)
	s.Engine.POST("/v1/reranking", s.rerank)
	s.Engine.POST("/rerank", s.rerank)
	s.Engine.POST("/reranking", s.rerank)
	s.Engine.POST("/v1/summarize", s.summarize)
}
