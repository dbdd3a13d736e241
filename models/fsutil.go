package models

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// tmpPrefix starts the name of every temporary file the store writes next to
// its final name. Names starting with '.' are never manifests or blobs, so a
// temporary file left by a crash is ignored by readers and removed by Prune.
const tmpPrefix = ".tmp-"

// writeFileAtomic writes data to path so that a crash at any point leaves
// either the old file or the new one: temp file in the same directory, write,
// fsync, close, rename over path, fsync the directory. beforeRename, when not
// nil, runs between fsync and rename (tests use it to fail there).
func writeFileAtomic(path string, data []byte, beforeRename func(tmp string) error) (err error) {
	dir := filepath.Dir(path)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("create %s: %w", dir, err)
	}
	tmp := filepath.Join(dir, tmpPrefix+filepath.Base(path)+"-"+randomSuffix())
	f, err := os.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
	if err != nil {
		return fmt.Errorf("create temporary file: %w", err)
	}
	defer func() {
		if err != nil {
			_ = f.Close() // already failed; the first error is the one to report
			_ = os.Remove(tmp)
		}
	}()
	if _, err = f.Write(data); err != nil {
		return fmt.Errorf("write %s: %w", tmp, err)
	}
	if err = f.Sync(); err != nil {
		return fmt.Errorf("sync %s: %w", tmp, err)
	}
	if err = f.Close(); err != nil {
		return fmt.Errorf("close %s: %w", tmp, err)
	}
	if beforeRename != nil {
		if err = beforeRename(tmp); err != nil {
			return err
		}
	}
	if err = os.Rename(tmp, path); err != nil {
		return fmt.Errorf("rename into %s: %w", path, err)
	}
	return syncDir(dir)
}

// syncDir fsyncs a directory so that a rename or removal in it is durable.
func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return fmt.Errorf("open directory %s: %w", dir, err)
	}
	serr := d.Sync()
	cerr := d.Close()
	if serr != nil && !errors.Is(serr, os.ErrInvalid) {
		return fmt.Errorf("sync directory %s: %w", dir, serr)
	}
	if cerr != nil {
		return fmt.Errorf("close directory %s: %w", dir, cerr)
	}
	return nil
}

// removeEmptyParents removes the empty directories from dir up to (not
// including) stop.
func removeEmptyParents(dir, stop string) {
	for dir != stop && strings.HasPrefix(dir, stop+string(filepath.Separator)) {
		if err := os.Remove(dir); err != nil {
			return // not empty, or gone: either way stop here
		}
		dir = filepath.Dir(dir)
	}
}

// randomSuffix returns 16 random hex characters.
func randomSuffix() string {
	var b [8]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never fails on supported platforms
	return hex.EncodeToString(b[:])
}
