//go:build !unix

package models

import (
	"io/fs"
	"os"
)

// linkCount is unknown here.
func linkCount(fs.FileInfo) uint64 { return 1 }

// openNoFollow opens path; the folder checks resolved its links already.
func openNoFollow(path string) (*os.File, error) { return os.Open(path) }
