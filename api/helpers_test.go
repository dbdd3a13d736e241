package api

import (
	"testing"

	"github.com/modeld/modeld/backends"
)

func backendsLibs(t *testing.T) backends.Libs { return backends.Libs{Root: t.TempDir()} }
