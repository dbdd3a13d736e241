//go:build !unix

package promptcache

import (
	"errors"
	"io/fs"
	"os"
)

const openFlags = os.O_RDONLY

// owned: ownership is not told here; links are still refused (by Lstat).
func owned(fs.FileInfo) error { return nil }

// FreeSpace is unknown here: the size setting alone bounds the cache.
func FreeSpace(string) (int64, error) { return 0, errors.New("free space is not known on this system") }
