package cache

import (
	"context"
	"errors"
	"testing"

	"github.com/modeld/modeld/models"
)

// "m" and "m:latest" are one model: they share one loaded instance, show as
// one line of Snapshot, and either spelling unloads it.
func TestCanonicalIDsShareOneInstance(t *testing.T) {
	l := newFakeLoader()
	l.slots = 2
	c := newTestCache(t, testConfig(), specs{"m": {RAM: 1}}, l)

	h1 := mustAcquire(t, c, "m")
	h2 := mustAcquire(t, c, "m:latest")
	if h1.Instance() != h2.Instance() {
		t.Fatalf("m and m:latest got instances %p and %p, want one", h1.Instance(), h2.Instance())
	}
	if got := l.count("m"); got != 1 {
		t.Fatalf("loads of m = %d, want 1", got)
	}
	if got := l.count("m:latest"); got != 0 {
		t.Fatalf("the resolver and loader saw m:latest %d times; they get the canonical id", got)
	}
	snap := c.Snapshot()
	if len(snap.Models) != 1 || snap.Models[0].ID != "m" {
		t.Fatalf("Snapshot models = %+v, want one entry m", snap.Models)
	}
	// Busy: refused under either spelling.
	if err := c.Unload(context.Background(), "m:latest", false); !errors.Is(err, ErrInUse) {
		t.Fatalf("Unload(m:latest) while held = %v, want ErrInUse", err)
	}
	h1.Release()
	h2.Release()
	if err := c.Unload(context.Background(), "m:latest", false); err != nil {
		t.Fatalf("Unload(m:latest) while m is loaded and idle = %v, want nil", err)
	}
	if !l.inst("m", 0).isClosed() {
		t.Fatal("Unload(m:latest) left m loaded")
	}
	if err := c.Unload(context.Background(), "m", false); !errors.Is(err, ErrNotLoaded) {
		t.Fatalf("Unload(m) after Unload(m:latest) = %v, want ErrNotLoaded", err)
	}
}

// An id the store would refuse is refused by the cache before any resolve.
func TestInvalidIDRefused(t *testing.T) {
	l := newFakeLoader()
	c := newTestCache(t, testConfig(), specs{}, l)
	for _, id := range []string{"../x", "M", "a::b", ""} {
		if _, err := c.Acquire(context.Background(), id, AcquireOptions{}); !errors.Is(err, models.ErrInvalidID) {
			t.Errorf("Acquire(%q) = %v, want ErrInvalidID", id, err)
		}
		if err := c.Unload(context.Background(), id, false); !errors.Is(err, models.ErrInvalidID) {
			t.Errorf("Unload(%q) = %v, want ErrInvalidID", id, err)
		}
	}
	select {
	case id := <-l.started:
		t.Fatalf("a refused id reached the loader: %q", id)
	default:
	}
}
