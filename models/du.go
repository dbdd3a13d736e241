package models

import (
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"
	"slices"
	"strings"
)

// Usage is the disk usage of a store. Every regular file under the root is
// counted exactly once, in one of Blobs, Manifests, Partials, Orphans or
// Other, so Total equals the bytes of the files under the root (apparent
// sizes; directories not counted).
type Usage struct {
	Models    []ModelUsage `json:"models"`
	Blobs     int64        `json:"blobs"`     // blobs some manifest names, each counted once
	Manifests int64        `json:"manifests"` // manifest files and blob verification records
	Partials  []Entry      `json:"partials"`  // downloads and imports in progress or interrupted, with their sidecars and locks
	Orphans   []Entry      `json:"orphans"`   // blobs no manifest names (Prune removes them)
	Other     []Entry      `json:"other"`     // temporary files left by a crash, unreadable manifests, lock files, strays
	Total     int64        `json:"total"`
}

// ModelUsage splits one model's bytes into those only it uses and those it
// shares with other models.
type ModelUsage struct {
	ID         string   `json:"id"`
	Unique     int64    `json:"unique"`                // bytes of blobs only this model uses (removing it frees them)
	Shared     int64    `json:"shared"`                // bytes of blobs other models also use
	SharedWith []string `json:"shared_with,omitempty"` // those models
	Missing    []string `json:"missing,omitempty"`     // files whose blob is not on disk
}

// Entry is one file of the store, relative to the root.
type Entry struct {
	Path string `json:"path"`
	Size int64  `json:"size"`
}

// Sum returns the total size of entries.
func Sum(entries []Entry) int64 {
	var n int64
	for _, e := range entries {
		n += e.Size
	}
	return n
}

// DiskUsage walks the store and accounts for every file in it.
func (s *Store) DiskUsage() (*Usage, error) {
	ms, err := s.scanManifests()
	if err != nil {
		return nil, err
	}
	refs := references(ms)
	manifestFiles := make(map[string]bool, len(ms))
	for _, m := range ms {
		if id, err := ParseID(m.ID); err == nil {
			manifestFiles[filepath.Join(dirManifests, id.manifestRel())] = true
		}
	}
	u := &Usage{}
	blobSize := make(map[string]int64)
	err = filepath.WalkDir(s.root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			if errors.Is(err, fs.ErrNotExist) {
				return nil
			}
			return err
		}
		if d.IsDir() {
			return nil
		}
		fi, err := d.Info()
		if errors.Is(err, fs.ErrNotExist) {
			return nil
		}
		if err != nil {
			return err
		}
		if !fi.Mode().IsRegular() {
			return nil // symlinks and the like: not counted, listed by nothing
		}
		rel, err := filepath.Rel(s.root, path)
		if err != nil {
			return err
		}
		e := Entry{Path: filepath.ToSlash(rel), Size: fi.Size()}
		u.Total += e.Size
		top, rest, _ := strings.Cut(e.Path, "/")
		switch {
		case top == dirBlobs && strings.HasPrefix(rest, blobNamePrefix) && IsSHA256Hex(strings.TrimPrefix(rest, blobNamePrefix)):
			h := strings.TrimPrefix(rest, blobNamePrefix)
			if len(refs[h]) > 0 {
				u.Blobs += e.Size
				blobSize[h] = e.Size
			} else {
				u.Orphans = append(u.Orphans, e)
			}
		case top == dirManifests && manifestFiles[rel], top == dirVerified && !strings.HasPrefix(rest, tmpPrefix):
			u.Manifests += e.Size
		case top == dirPartials:
			u.Partials = append(u.Partials, e)
		default:
			u.Other = append(u.Other, e)
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("disk usage: %w", err)
	}
	for _, m := range ms {
		mu := ModelUsage{ID: m.ID}
		seen := make(map[string]bool)
		others := make(map[string]bool)
		for _, f := range m.Files {
			h, err := parseDigest(f.Digest)
			if err != nil || seen[h] {
				continue
			}
			seen[h] = true
			size, ok := blobSize[h]
			if !ok {
				mu.Missing = append(mu.Missing, f.Path)
				continue
			}
			if len(refs[h]) == 1 {
				mu.Unique += size
				continue
			}
			mu.Shared += size
			for _, other := range refs[h] {
				if other != m.ID {
					others[other] = true
				}
			}
		}
		for o := range others {
			mu.SharedWith = append(mu.SharedWith, o)
		}
		slices.Sort(mu.SharedWith)
		u.Models = append(u.Models, mu)
	}
	return u, nil
}
