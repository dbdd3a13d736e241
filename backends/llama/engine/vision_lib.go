package engine

import (
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"runtime"

	"github.com/ebitengine/purego"
	"github.com/hybridgroup/yzma/pkg/mtmd"

	"github.com/modeld/modeld/backends"
)

// loadMultimodal loads the multimodal library from dir when it is there;
// the error says why images cannot be read (nil: they can).
func loadMultimodal(dir string) error {
	// The prebuilt packages lack it: scripts/bootstrap --with-mtmd builds
	// it from the same release's source into the library dir.
	name := backends.PlatformLibNames(runtime.GOOS).Multimodal
	if _, err := os.Stat(filepath.Join(dir, name)); err != nil {
		return fmt.Errorf("%s is not installed in %s (scripts/bootstrap --with-mtmd builds it)", name, dir)
	}
	if err := mtmd.Load(dir); err != nil {
		slog.Warn("llama: the multimodal library did not load; models read text only", "dir", dir, "err", err)
		return fmt.Errorf("%s in %s did not load: %w", name, dir, err)
	}
	// mtmd's own log lines go where llama.cpp's go.
	mtmd.LogSet(purego.NewCallback(native.log.callback))
	return nil
}

// MultimodalError says why llama.cpp's multimodal library is not loaded
// (nil: it is, and a model opened with a projector reads images). Init must
// have run.
func MultimodalError() error {
	if !initialized() {
		return ErrNotInitialized
	}
	return native.mtmd
}
