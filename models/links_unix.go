//go:build unix

package models

import (
	"io/fs"
	"os"
	"syscall"
)

// linkCount is a file's number of hard links (1 when the system cannot say).
func linkCount(fi fs.FileInfo) uint64 {
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		return uint64(st.Nlink) //nolint:unconvert // uint16 on darwin
	}
	return 1
}

// openNoFollow opens path for reading, refusing a symlink as its last
// component, so a file swapped for a link after the checks is not followed.
func openNoFollow(path string) (*os.File, error) {
	return os.OpenFile(path, os.O_RDONLY|syscall.O_NOFOLLOW, 0)
}
