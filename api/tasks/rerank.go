package tasks

import (
	"encoding/json"
	"net/http"

	"github.com/gin-gonic/gin"

	"github.com/modeld/modeld/api/core"
	"github.com/modeld/modeld/backends"
)

// RerankRequest is the rerank request of llama.cpp's server, LocalAI and Jina:
// documents are strings (or objects with a "text" field).
type RerankRequest struct {
	Model     string            `json:"model"`
	Query     *string           `json:"query"`
	Documents []json.RawMessage `json:"documents"`
	// TopN keeps the N most relevant documents; absent: all.
	TopN *int `json:"top_n"`
	// ReturnDocuments adds each document's text to its result; default true.
	ReturnDocuments *bool          `json:"return_documents"`
	KeepAlive       core.KeepAlive `json:"keep_alive"`
}

// RerankDocument is a document as results return it.
type RerankDocument struct {
	Text string `json:"text"`
}

// RerankItem is one document's relevance.
type RerankItem struct {
	Index          int             `json:"index"`
	RelevanceScore float64         `json:"relevance_score"`
	Document       *RerankDocument `json:"document,omitempty"`
}

// RerankResponse lists the documents most relevant first.
type RerankResponse struct {
	Object  string         `json:"object"` // "list"
	Model   string         `json:"model"`
	Results []RerankItem   `json:"results"`
	Usage   core.TaskUsage `json:"usage"`
}

func (r *RerankRequest) Validate() (string, []string, backends.RerankOptions, error) {
	var errs []error
	var opts backends.RerankOptions
	query := ""
	switch {
	case r.Query == nil:
		errs = append(errs, core.BadRequest("query", "query is required"))
	case *r.Query == "":
		errs = append(errs, core.BadRequest("query", "query is an empty string"))
	default:
		query = *r.Query
	}
	switch n := len(r.Documents); {
	case n == 0:
		errs = append(errs, core.BadRequest("documents", "documents is required: an array of at least one string"))
	case n > core.MaxRerankDocuments:
		return "", nil, opts, core.JoinBadRequests(append(errs, core.TooMany("documents", n, core.MaxRerankDocuments, "documents")))
	}
	docs := make([]string, len(r.Documents))
	for i, raw := range r.Documents {
		if json.Unmarshal(raw, &docs[i]) != nil {
			var obj struct {
				Text *string `json:"text"`
			}
			if json.Unmarshal(raw, &obj) != nil || obj.Text == nil {
				errs = append(errs, core.BadRequest("documents", "documents[%d] must be a string or an object with a \"text\" string", i))
				continue
			}
			docs[i] = *obj.Text
		}
		if docs[i] == "" {
			errs = append(errs, core.BadRequest("documents", "documents[%d] is an empty string", i))
		}
	}
	if r.TopN != nil {
		if *r.TopN < 1 {
			errs = append(errs, core.BadRequest("top_n", "top_n must be at least 1, got %d", *r.TopN))
		}
		opts.TopN = *r.TopN
	}
	return query, docs, opts, core.JoinBadRequests(errs)
}

func (s *tasksAPI) rerank(c *gin.Context) {
	var req RerankRequest
	if err := core.DecodeJSON(c, &req); err != nil {
		core.WriteError(c, err)
		return
	}
	query, docs, opts, err := req.Validate()
	if err != nil {
		core.WriteError(c, err)
		return
	}
	h, rr, ok := core.AcquireAs[backends.Reranker](s.Core, c, req.Model, req.KeepAlive, core.RerankEndpoint)
	if !ok {
		return
	}
	defer h.Release()
	res, err := rr.Rerank(c.Request.Context(), query, docs, opts)
	if err != nil {
		core.WriteError(c, err)
		return
	}
	withDocs := req.ReturnDocuments == nil || *req.ReturnDocuments
	core.NoteTokens(c, res.Tokens, 0)
	out := RerankResponse{Object: "list", Model: req.Model, Results: make([]RerankItem, len(res.Results)), Usage: core.NewTaskUsage(res.Tokens)}
	for i, r := range res.Results {
		if !core.Finite(r.Score) {
			core.WriteError(c, core.NonFinite(req.Model))
			return
		}
		out.Results[i] = RerankItem{Index: r.Index, RelevanceScore: r.Score}
		if withDocs {
			out.Results[i].Document = &RerankDocument{Text: docs[r.Index]}
		}
	}
	core.SetTruncated(c, res.Truncated)
	c.JSON(http.StatusOK, out)
}
