package main

import (
	"fmt"
	"io"
	"path/filepath"

	"github.com/modeld/modeld/backends/llama/promptcache"
	"github.com/modeld/modeld/models"
)

// The on-disk prompt cache as modeld du and modeld prune --cache see it.

func (a *app) promptCacheDir() string { return filepath.Join(a.cfg.Home, promptCacheDir) }

// duReport is modeld du --json: the store's usage and the prompt cache's.
type duReport struct {
	*models.Usage
	PromptCache promptcache.Usage `json:"prompt_cache"`
}

// writePromptCacheUsage writes du's line of the prompt cache.
func writePromptCacheUsage(w io.Writer, u promptcache.Usage) {
	fmt.Fprintf(w, "prompt cache\t%s\t(%d prefixes in %s; modeld prune --cache empties it)\n", humanBytes(u.Bytes), u.Entries, u.Dir)
}

// prunePromptCache empties the prompt cache (modeld prune --cache).
func (a *app) prunePromptCache(asJSON bool) error {
	u, err := promptcache.Clear(a.promptCacheDir())
	if asJSON {
		if jerr := writeJSON(a.stdout, u); jerr != nil {
			return jerr
		}
		return err
	}
	fmt.Fprintf(a.stdout, "removed %d cached prompt prefixes from %s\nfreed %s\n", u.Entries, u.Dir, humanBytes(u.Bytes))
	return err
}
