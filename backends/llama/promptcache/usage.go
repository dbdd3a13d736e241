package promptcache

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"time"
)

type fileInfo struct {
	name string
	size int64
	mod  time.Time
}

// listEntries is the directory's entry files (of every key), by Lstat: a
// link counts as its own size, never its target's.
func listEntries(dir string) ([]fileInfo, error) {
	des, err := os.ReadDir(dir)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return nil, nil
		}
		return nil, fmt.Errorf("promptcache: %w", err)
	}
	var out []fileInfo
	for _, de := range des {
		if !strings.HasSuffix(de.Name(), ext) {
			continue
		}
		fi, err := de.Info()
		if err != nil {
			continue
		}
		out = append(out, fileInfo{name: de.Name(), size: fi.Size(), mod: fi.ModTime()})
	}
	return out, nil
}

func sumSizes(fs []fileInfo) int64 {
	var n int64
	for _, f := range fs {
		n += f.size
	}
	return n
}

// Usage is what a cache directory holds.
type Usage struct {
	Dir     string `json:"dir"`
	Entries int    `json:"entries"`
	Bytes   int64  `json:"bytes"` // entries and temporary files
}

// DiskUsage reads dir's usage; a missing directory holds nothing.
func DiskUsage(dir string) (Usage, error) {
	u := Usage{Dir: dir}
	des, err := os.ReadDir(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return u, nil
	}
	if err != nil {
		return u, fmt.Errorf("promptcache: %w", err)
	}
	for _, de := range des {
		if !strings.HasSuffix(de.Name(), ext) {
			continue
		}
		fi, err := de.Info()
		if err != nil {
			continue
		}
		if !strings.HasPrefix(de.Name(), tmpPrefix) {
			u.Entries++
		}
		u.Bytes += fi.Size()
	}
	return u, nil
}

// Clear removes every entry and temporary file of dir (links themselves,
// never what they point at) and returns what was there.
func Clear(dir string) (Usage, error) {
	u, err := DiskUsage(dir)
	if err != nil {
		return u, err
	}
	des, err := os.ReadDir(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return u, nil
	}
	if err != nil {
		return u, fmt.Errorf("promptcache: %w", err)
	}
	var errs []error
	for _, de := range des {
		if strings.HasSuffix(de.Name(), ext) {
			if err := os.Remove(filepath.Join(dir, de.Name())); err != nil && !errors.Is(err, fs.ErrNotExist) {
				errs = append(errs, err)
			}
		}
	}
	return u, errors.Join(errs...)
}
