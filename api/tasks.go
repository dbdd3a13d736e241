package api

// tasksAPI are modeld's own task routes: classification, reranking (also
// on the paths other rerank servers use) and summarization.
type tasksAPI struct{ *Core }

// registerTasks adds the task routes.
func registerTasks(c *Core) {
	s := &tasksAPI{c}
	s.engine.POST("/v1/classify", s.classify)
	s.engine.POST("/v1/rerank", s.rerank)
	s.engine.POST("/v1/reranking", s.rerank)
	s.engine.POST("/rerank", s.rerank)
	s.engine.POST("/reranking", s.rerank)
	s.engine.POST("/v1/summarize", s.summarize)
}
