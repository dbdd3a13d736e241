//go:build unix

package promptcache

import (
	"fmt"
	"io/fs"
	"os"
	"syscall"
)

// openFlags open a cache file without following a symbolic link.
const openFlags = os.O_RDONLY | syscall.O_NOFOLLOW

// owned reports why fi is not this user's, or nil.
func owned(fi fs.FileInfo) error {
	if st, ok := fi.Sys().(*syscall.Stat_t); ok && int(st.Uid) != os.Getuid() {
		return fmt.Errorf("owned by user %d, not %d", st.Uid, os.Getuid())
	}
	return nil
}

// FreeSpace is the bytes an unprivileged process may still write on the
// file system holding dir.
func FreeSpace(dir string) (int64, error) {
	var st syscall.Statfs_t
	if err := syscall.Statfs(dir, &st); err != nil {
		return 0, fmt.Errorf("free space of %s: %w", dir, err)
	}
	return int64(st.Bavail) * int64(st.Bsize), nil //nolint:unconvert // field types differ per OS
}
