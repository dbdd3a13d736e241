package promptcache

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

// The writer saves and touches entries in the order it is given them, so
// the newest entry is the one handed over last, even when that one was
// already on disk (touched, not written again).
func TestNewestFollowsTheOrderOfSaves(t *testing.T) {
	e := newEnv(t)
	e.now = time.Now()
	c := e.open(t, keyA, 0)
	a, b, d := toks(80, 0), toks(80, 1000), toks(80, 2000)
	if c.Newest() != "" {
		t.Fatal("an empty cache has a newest entry")
	}
	for _, p := range [][]int32{a, b, d} {
		if !c.SaveAsync(p, state(500, byte(p[0]))) {
			t.Fatal("save not queued")
		}
	}
	if err := c.Sync(context.Background()); err != nil {
		t.Fatal(err)
	}
	nameD, _ := c.Lookup(d)
	if got := c.Newest(); got != nameD {
		t.Fatalf("newest %s, want the last saved %s", got, nameD)
	}
	e.now = e.now.Add(time.Second)
	c.TouchAsync(a[:70]) // a's entry covers this prefix
	if err := c.Sync(context.Background()); err != nil {
		t.Fatal(err)
	}
	nameA, _ := c.Lookup(a)
	if got := e.open(t, keyA, 0).Newest(); got != nameA {
		t.Fatalf("after a touch, another process's newest is %s, want %s", got, nameA)
	}
}

// A read-ahead is taken by the first Load of its entry, or by Prefetched,
// once; a Load of another entry drops it; a hostile file read ahead is
// refused and removed exactly as by Load.
func TestPrefetch(t *testing.T) {
	e := newEnv(t)
	c := e.open(t, keyA, 0)
	a, b := toks(80, 0), toks(80, 1000)
	for i, p := range [][]int32{a, b} {
		if err := c.Save(p, state(700, byte(i+1))); err != nil {
			t.Fatal(err)
		}
	}
	nameA, _ := c.Lookup(a)
	nameB, _ := c.Lookup(b)

	if c.Ahead() != nil {
		t.Fatal("a read-ahead before any Prefetch")
	}
	c.Prefetch(nameA)
	<-c.Ahead()
	name, got, st, ok := c.Prefetched()
	if !ok || name != nameA || !slices.Equal(got, a) || !bytes.Equal(st, state(700, 1)) {
		t.Fatalf("Prefetched = %s, %d tokens, %d bytes, %v", name, len(got), len(st), ok)
	}
	if _, _, _, ok := c.Prefetched(); ok || c.Ahead() != nil {
		t.Fatal("a read-ahead was taken twice")
	}

	// Load takes it (and it is the entry's own bytes).
	c.Prefetch(nameB)
	got, st, err := c.Load(nameB)
	if err != nil || !slices.Equal(got, b) || !bytes.Equal(st, state(700, 2)) {
		t.Fatalf("Load after Prefetch: %d tokens, %d bytes, %v", len(got), len(st), err)
	}
	if c.Ahead() != nil {
		t.Fatal("the read-ahead stayed after its Load")
	}
	// A Load of another entry reads that one and drops the read-ahead.
	c.Prefetch(nameB)
	if got, _, err := c.Load(nameA); err != nil || !slices.Equal(got, a) {
		t.Fatalf("Load of another entry: %d tokens, %v", len(got), err)
	}
	if _, _, _, ok := c.Prefetched(); ok {
		t.Fatal("a read-ahead of another entry survived a Load")
	}

	// A flipped byte (in an entry no read-ahead still reads): the read-ahead fails, the file is removed and logged.
	flip(t, filepath.Join(e.dir, nameA), 200)
	c.Prefetch(nameA)
	<-c.Ahead()
	if _, _, _, ok := c.Prefetched(); ok {
		t.Fatal("a flipped entry was read ahead")
	}
	if _, err := os.Stat(filepath.Join(e.dir, nameA)); !os.IsNotExist(err) {
		t.Fatalf("the flipped entry is still there (%v)", err)
	}
	if !strings.Contains(e.log.String(), nameA) {
		t.Fatalf("no log line names the flipped entry:\n%s", e.log)
	}
}
