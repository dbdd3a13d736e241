package models

import (
	"io/fs"
	"syscall"
)

// fileIdentity returns a file's change time (ns) and inode: writing its
// bytes, or setting its mtime back, changes the change time.
func fileIdentity(fi fs.FileInfo) (ctimeNS int64, inode uint64) {
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		return st.Ctimespec.Nano(), st.Ino
	}
	return 0, 0
}
