package models

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
)

// A folder import reads only files that belong to the folder. The user names
// the folder; what is inside it may come from anyone (an unpacked archive, a
// shared directory), so a link inside it must not make the store copy, and
// later serve, a file from elsewhere (an ONNX folder whose model.onnx_data
// is a symlink to ~/.ssh/id_ed25519 imported with exit 0, and its bytes came
// back as the embedding). The rules:
//
//   - a symlink is followed only when its target, with every link resolved,
//     lies inside the folder, or, for a Hugging Face cache snapshot
//     (<repo>/snapshots/<revision>), inside that repository's blobs/ folder,
//     where the cache keeps the files its snapshot links name;
//   - a file with more than one hard link is refused: another name of it may
//     lie anywhere on the file system, and the store cannot tell where;
//   - files are opened without following a final symlink, so a file swapped
//     for a link after the check is refused, not read.
//
// A GGUF the user names directly may be a symlink: the user chose it.

// folderRoots returns the resolved folder and the places its symlinks may
// point into.
func folderRoots(dir string) (real string, roots []string, err error) {
	real, err = filepath.EvalSymlinks(dir)
	if err != nil {
		return "", nil, err
	}
	roots = []string{real}
	if parent := filepath.Dir(real); filepath.Base(parent) == "snapshots" {
		blobs := filepath.Join(filepath.Dir(parent), "blobs")
		if rb, err := filepath.EvalSymlinks(blobs); err == nil {
			roots = append(roots, rb)
		}
	}
	return real, roots, nil
}

func inside(path, root string) bool {
	rel, err := filepath.Rel(root, path)
	return err == nil && filepath.IsLocal(rel)
}

// folderFile resolves the file at p (inside the folder whose roots are
// roots) to the path that is read, refusing links that leave the roots and
// files with more than one hard link. ok is false for entries that are not
// regular files (directories, links to directories, devices): they are
// skipped.
func folderFile(p, rel string, roots []string) (real string, ok bool, err error) {
	lfi, err := os.Lstat(p)
	if err != nil {
		return "", false, err
	}
	real = p
	if lfi.Mode()&fs.ModeSymlink != 0 {
		if real, err = filepath.EvalSymlinks(p); err != nil {
			if errors.Is(err, fs.ErrNotExist) {
				return "", false, nil // a dangling link names no file
			}
			return "", false, err
		}
		in := false
		for _, r := range roots {
			in = in || inside(real, r)
		}
		if !in {
			return "", false, fmt.Errorf("%w: %s is a symlink to %s, outside the folder: a folder import copies only the folder's own files (copy the file into the folder)", ErrInvalidModel, rel, real)
		}
	}
	fi, err := os.Stat(real)
	if err != nil {
		return "", false, err
	}
	if !fi.Mode().IsRegular() {
		return "", false, nil
	}
	if n := linkCount(fi); n > 1 {
		return "", false, fmt.Errorf("%w: %s has %d hard links: another name of it may lie outside the folder, so it is not imported (copy it so it has one link: cp --no-preserve=links)", ErrInvalidModel, rel, n)
	}
	return real, true, nil
}

// openFolderFile opens a file folderFile resolved and checks it again on the
// open descriptor: still a regular file with one link.
func openFolderFile(real, rel string) (*os.File, error) {
	f, err := openNoFollow(real)
	if err != nil {
		return nil, fmt.Errorf("open %s: %w", rel, err)
	}
	fi, err := f.Stat()
	if err == nil && (!fi.Mode().IsRegular() || linkCount(fi) > 1) {
		err = fmt.Errorf("%w: %s changed while it was imported (now %v with %d links)", ErrInvalidModel, rel, fi.Mode().Type(), linkCount(fi))
	}
	if err != nil {
		_ = f.Close() // read-only; the check's error is the one to report
		return nil, err
	}
	return f, nil
}

// hasDotPrefix reports a hidden folder (.git, .cache) to skip.
func hasDotPrefix(name string) bool { return strings.HasPrefix(name, ".") }
