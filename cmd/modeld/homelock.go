package main

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"

	"github.com/gofrs/flock"
)

// homeLockFile is the lock that lets one daemon at a time serve a home: an
// exclusive flock on it, held for the daemon's life (the kernel drops it
// when the process ends, however it ends), with the holder's process id
// written in it for the message a second daemon gives. Only `modeld serve`
// takes it: the CLI's store commands (ls, import, rm, pull, prune) work
// beside a running daemon through the store's own locks (models/store.go:
// store.lock, active.lock), which are other files, so neither waits on the
// other.
const homeLockFile = "daemon.lock"

// HomeLockedError: another daemon serves this home.
type HomeLockedError struct {
	Home string
	Lock string
	PID  int // the holder's process id; 0 when it has not written it yet
}

func (e *HomeLockedError) Error() string {
	who := "another modeld"
	if e.PID > 0 {
		who = fmt.Sprintf("another modeld (process %d)", e.PID)
	}
	return fmt.Sprintf("%s is already serving the home %s (it holds %s); stop it first, or give this one another --home (MODELD_HOME)",
		who, e.Home, e.Lock)
}

// homeLock is a held home lock.
type homeLock struct {
	fl   *flock.Flock
	path string
}

// lockHome takes the home lock of home without waiting: a *HomeLockedError
// when another process holds it.
func lockHome(home string) (*homeLock, error) {
	if err := os.MkdirAll(home, 0o755); err != nil {
		return nil, fmt.Errorf("create the home %s: %w", home, err)
	}
	path := filepath.Join(home, homeLockFile)
	fl := flock.New(path, flock.SetPermissions(0o644))
	ok, err := fl.TryLock()
	if err != nil {
		return nil, fmt.Errorf("lock the home %s: %w", home, err)
	}
	if !ok {
		_ = fl.Close()
		return nil, &HomeLockedError{Home: home, Lock: path, PID: lockHolder(path)}
	}
	// A second descriptor writes the id: flock locks belong to the open
	// file, so closing this one keeps the lock.
	if err := os.WriteFile(path, []byte(strconv.Itoa(os.Getpid())+"\n"), 0o644); err != nil {
		return nil, errors.Join(fmt.Errorf("write the home lock %s: %w", path, err), fl.Close())
	}
	return &homeLock{fl: fl, path: path}, nil
}

// lockHolder reads the process id in a lock file; 0 when there is none.
func lockHolder(path string) int {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0
	}
	pid, err := strconv.Atoi(string(bytes.TrimSpace(b)))
	if err != nil || pid <= 0 {
		return 0
	}
	return pid
}

// release empties the lock file (no stale id for the next reader) and
// drops the lock.
func (l *homeLock) release() error {
	terr := os.Truncate(l.path, 0)
	if err := l.fl.Unlock(); err != nil {
		return errors.Join(terr, fmt.Errorf("unlock the home: %w", err))
	}
	if terr != nil {
		return fmt.Errorf("empty the home lock: %w", terr)
	}
	return nil
}
