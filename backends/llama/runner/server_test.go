package runner

import (
	"context"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// watchParent notices a parent that changed, at once or at a tick, and
// ends without error when its context does.
func TestWatchParent(t *testing.T) {
	var ppid atomic.Int64
	ppid.Store(100)
	getppid := func() int { return int(ppid.Load()) }
	tick := make(chan time.Time)
	errc := make(chan error, 1)
	go func() { errc <- watchParent(context.Background(), 0, getppid, tick) }()
	tick <- time.Time{} // taken: the watcher has read 100 as its parent
	ppid.Store(1)       // re-parented
	var err error
	select {
	case tick <- time.Time{}:
		err = <-errc
	case err = <-errc:
	}
	if err == nil || !strings.Contains(err.Error(), "parent process 100 is gone (parent is now 1)") {
		t.Errorf("err = %v", err)
	}

	// A parent already gone before the first look (a given pid that is
	// not the parent) is noticed at once.
	if err := watchParent(context.Background(), 7, func() int { return 1 }, nil); err == nil {
		t.Error("no error for a parent that is not the expected one")
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := watchParent(ctx, 5, func() int { return 5 }, nil); err != nil {
		t.Errorf("cancelled watch: %v", err)
	}
}
