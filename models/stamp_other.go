//go:build !linux && !darwin

package models

import "io/fs"

// fileIdentity is unknown here: stamps compare size and mtime only.
func fileIdentity(fs.FileInfo) (ctimeNS int64, inode uint64) { return 0, 0 }
