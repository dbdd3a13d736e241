package promptcache

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
)

// logBuf collects the cache's log lines.
type logBuf struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *logBuf) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *logBuf) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

var (
	keyA = Key{Model: [32]byte{1}, Config: "lib v1; kv f16/f16; ctx 4096; layers 2"}
	keyB = Key{Model: [32]byte{2}, Config: "lib v1; kv f16/f16; ctx 4096; layers 2"}
)

func toks(n int, seed int32) []int32 {
	t := make([]int32, n)
	for i := range t {
		t[i] = seed + int32(i)
	}
	return t
}

func state(n int, b byte) []byte { return bytes.Repeat([]byte{b}, n) }

type env struct {
	dir  string
	log  *logBuf
	free int64
	now  time.Time
}

func newEnv(t *testing.T) *env {
	return &env{dir: filepath.Join(t.TempDir(), "kvcache"), log: &logBuf{}, free: 1 << 40,
		now: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}
}

func (e *env) open(t *testing.T, key Key, maxBytes int64) *Cache {
	t.Helper()
	c, err := Open(Options{Dir: e.dir, MaxBytes: maxBytes, Margin: 1 << 20,
		Log:       slog.New(slog.NewTextHandler(e.log, &slog.HandlerOptions{Level: slog.LevelDebug})),
		FreeSpace: func(string) (int64, error) { return e.free, nil },
		Now:       func() time.Time { return e.now }}, key)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close(context.Background()) })
	return c
}

func (e *env) only(t *testing.T) string {
	t.Helper()
	files, err := listEntries(e.dir)
	if err != nil || len(files) != 1 {
		t.Fatalf("entries %v (%v), want one", files, err)
	}
	return files[0].name
}

func TestSaveLookupLoad(t *testing.T) {
	e := newEnv(t)
	c := e.open(t, keyA, 0)
	prefix := toks(100, 7)
	if err := c.Save(prefix, state(1000, 0xab)); err != nil {
		t.Fatal(err)
	}
	fi, err := os.Stat(filepath.Join(e.dir, e.only(t)))
	if err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("entry mode %v (%v), want 0600", fi.Mode(), err)
	}
	di, err := os.Stat(e.dir)
	if err != nil || di.Mode().Perm() != 0o700 {
		t.Fatalf("directory mode %v (%v), want 0700", di.Mode(), err)
	}
	// A new process (another Open) finds it; a prompt sharing 60 tokens
	// gets it with n 60, token by token.
	c2 := e.open(t, keyA, 0)
	prompt := append(slices.Clone(prefix[:60]), 9999, 9998)
	name, n := c2.Lookup(prompt)
	if n != 60 {
		t.Fatalf("lookup shares %d tokens, want 60", n)
	}
	got, st, err := c2.Load(name)
	if err != nil || !slices.Equal(got, prefix) || !bytes.Equal(st, state(1000, 0xab)) {
		t.Fatalf("load: %d tokens, %d bytes, %v", len(got), len(st), err)
	}
	if _, n := c2.Lookup([]int32{-5, 1}); n != 0 {
		t.Fatalf("an unrelated prompt shares %d tokens", n)
	}
	// Another model never sees it.
	if cb := e.open(t, keyB, 0); cb.Len() != 0 {
		t.Fatalf("model B sees %d entries of model A", cb.Len())
	}
}

// An entry another process removed (prune --cache, another runner's
// eviction) is neither offered nor taken to cover a new save.
func TestRemovedEntryForgotten(t *testing.T) {
	e := newEnv(t)
	c := e.open(t, keyA, 0)
	p := toks(100, 1)
	if err := c.Save(p, state(10, 1)); err != nil {
		t.Fatal(err)
	}
	if _, err := Clear(e.dir); err != nil {
		t.Fatal(err)
	}
	if c.Covers(p) {
		t.Fatal("a removed entry covers its prefix")
	}
	if _, n := c.Lookup(p); n != 0 {
		t.Fatal("a removed entry is offered")
	}
	if err := c.Save(p, state(10, 1)); err != nil || len(entriesOf(t, e.dir)) != 1 {
		t.Fatalf("save after the removal: %v", err)
	}
}

func entriesOf(t *testing.T, dir string) []fileInfo {
	t.Helper()
	fs, err := listEntries(dir)
	if err != nil {
		t.Fatal(err)
	}
	return fs
}

func TestSaveReplacesServedPrefixes(t *testing.T) {
	e := newEnv(t)
	c := e.open(t, keyA, 0)
	long := toks(200, 1)
	if err := c.Save(long[:50], state(10, 1)); err != nil {
		t.Fatal(err)
	}
	if err := c.Save(long, state(10, 2)); err != nil {
		t.Fatal(err)
	}
	if c.Len() != 1 || !c.Covers(long[:50]) {
		t.Fatalf("%d entries, want the longer one alone", c.Len())
	}
	e.only(t)
	// A prefix of what is saved is not saved again.
	if err := c.Save(long[:120], state(10, 3)); err != nil || c.Len() != 1 {
		t.Fatalf("saving a covered prefix: %v, %d entries", err, c.Len())
	}
}

func TestBoundEvictsLeastRecentlyUsed(t *testing.T) {
	e := newEnv(t)
	one := headerLen(len(keyA.Config), 10) + 1000 + sumLen
	c := e.open(t, keyA, 3*one)
	for i := range 3 {
		e.now = e.now.Add(time.Minute)
		if err := c.Save(toks(10, int32(100*i)), state(1000, byte(i))); err != nil {
			t.Fatal(err)
		}
		name, _ := c.Lookup(toks(10, int32(100*i)))
		_ = os.Chtimes(filepath.Join(e.dir, name), e.now, e.now)
	}
	// Using the oldest makes the second the least recently used.
	e.now = e.now.Add(time.Minute)
	name0, _ := c.Lookup(toks(10, 0))
	if _, _, err := c.Load(name0); err != nil {
		t.Fatal(err)
	}
	if err := c.Save(toks(10, 900), state(1000, 9)); err != nil {
		t.Fatal(err)
	}
	if _, n := c.Lookup(toks(10, 100)); n != 0 {
		t.Fatal("the least recently used entry was kept")
	}
	for _, s := range []int32{0, 200, 900} {
		if _, n := c.Lookup(toks(10, s)); n != 10 {
			t.Fatalf("entry %d was evicted", s)
		}
	}
	files, _ := listEntries(e.dir)
	if sumSizes(files) > 3*one {
		t.Fatalf("the directory holds %d bytes, over the bound %d", sumSizes(files), 3*one)
	}
	// An entry larger than the bound is refused, and nothing is evicted.
	if err := c.Save(toks(10, 5000), state(int(4*one), 1)); err == nil {
		t.Fatal("an entry over the bound was saved")
	}
	if c.Len() != 3 {
		t.Fatalf("%d entries after a refused save, want 3", c.Len())
	}
}

func TestBoundFollowsFreeDisk(t *testing.T) {
	e := newEnv(t)
	c := e.open(t, keyA, 1<<30)
	// 1 MiB margin, 1 MiB + 500 bytes free: an entry of ~1000 bytes cannot be written.
	e.free = 1<<20 + 500
	if err := c.Save(toks(10, 1), state(1000, 1)); err == nil || !strings.Contains(err.Error(), "bound") {
		t.Fatalf("save with the disk full: %v, want refused by the bound", err)
	}
	e.free = 1<<20 + 1<<16
	if err := c.Save(toks(10, 1), state(1000, 1)); err != nil {
		t.Fatal(err)
	}
	if b, err := c.Bound(); err != nil || b >= 1<<30 {
		t.Fatalf("bound %d (%v), want below the size setting", b, err)
	}
}

func TestSaveAsyncAndClose(t *testing.T) {
	e := newEnv(t)
	c := e.open(t, keyA, 0)
	for i := range 5 {
		if !c.SaveAsync(toks(20, int32(1000*i)), state(100, byte(i))) {
			t.Fatalf("save %d not queued", i)
		}
	}
	if err := c.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	if c.SaveAsync(toks(20, 77), state(10, 1)) {
		t.Fatal("a save after Close was queued")
	}
	if n := e.open(t, keyA, 0).Len(); n != 5 {
		t.Fatalf("%d entries after Close, want 5", n)
	}
}

func TestDiskUsageAndClear(t *testing.T) {
	e := newEnv(t)
	c := e.open(t, keyA, 0)
	_ = c.Save(toks(10, 1), state(100, 1))
	_ = c.Save(toks(10, 50), state(100, 2))
	outside := filepath.Join(t.TempDir(), "precious")
	if err := os.WriteFile(outside, []byte("keep"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(outside, filepath.Join(e.dir, "link.kv")); err != nil {
		t.Fatal(err)
	}
	u, err := DiskUsage(e.dir)
	if err != nil || u.Entries != 3 || u.Bytes == 0 {
		t.Fatalf("usage %+v (%v)", u, err)
	}
	if _, err := Clear(e.dir); err != nil {
		t.Fatal(err)
	}
	if u, _ := DiskUsage(e.dir); u.Entries != 0 || u.Bytes != 0 {
		t.Fatalf("after Clear: %+v", u)
	}
	if b, err := os.ReadFile(outside); err != nil || string(b) != "keep" {
		t.Fatalf("Clear reached through a link: %q %v", b, err)
	}
	if u, err := DiskUsage(filepath.Join(e.dir, "missing")); err != nil || u.Entries != 0 {
		t.Fatalf("missing directory: %+v %v", u, err)
	}
}

func TestDirectoryIsPrivate(t *testing.T) {
	e := newEnv(t)
	if err := os.MkdirAll(e.dir, 0o755); err != nil {
		t.Fatal(err)
	}
	e.open(t, keyA, 0)
	if fi, _ := os.Stat(e.dir); fi.Mode().Perm() != 0o700 {
		t.Fatalf("directory mode %v, want 0700", fi.Mode().Perm())
	}
	// A link in place of the directory is refused.
	target := t.TempDir()
	link := filepath.Join(t.TempDir(), "kvcache")
	if err := os.Symlink(target, link); err != nil {
		t.Fatal(err)
	}
	if _, err := Open(Options{Dir: link}, keyA); err == nil {
		t.Fatal("a directory link was opened")
	}
}

// The attacker's side: each broken or planted file is refused with a log
// line, never handed on, and the cache still works.
func TestHostileFilesRefused(t *testing.T) {
	prefix := toks(64, 3)
	good := state(4096, 0x5a)
	cases := []struct {
		name   string
		attack func(t *testing.T, e *env, path string)
		want   string
	}{
		{"truncated", func(t *testing.T, e *env, path string) {
			fi, _ := os.Stat(path)
			if err := os.Truncate(path, fi.Size()-100); err != nil {
				t.Fatal(err)
			}
		}, "does not match"},
		{"truncated in the header", func(t *testing.T, e *env, path string) {
			if err := os.Truncate(path, 40); err != nil {
				t.Fatal(err)
			}
		}, "shorter than a header"},
		{"bit flipped in the state", func(t *testing.T, e *env, path string) {
			flip(t, path, -500)
		}, "checksum"},
		{"bit flipped in the tokens", func(t *testing.T, e *env, path string) {
			flip(t, path, int(headerLen(len(keyA.Config), 10)))
		}, ""},
		{"length field grown", func(t *testing.T, e *env, path string) {
			b, _ := os.ReadFile(path)
			off := headerLen(len(keyA.Config), len(prefix)) - 8
			b[off+7] = 0x7f
			if err := os.WriteFile(path, b, 0o600); err != nil {
				t.Fatal(err)
			}
		}, "does not match"},
		{"swapped from another model", func(t *testing.T, e *env, path string) {
			other := filepath.Join(t.TempDir(), "kv")
			cb := e.open(t, keyB, 0)
			if err := cb.Save(prefix, good); err != nil {
				t.Fatal(err)
			}
			bname, _ := cb.Lookup(prefix)
			if err := os.Rename(filepath.Join(e.dir, bname), other); err != nil {
				t.Fatal(err)
			}
			if err := os.Rename(other, path); err != nil {
				t.Fatal(err)
			}
		}, ""},
		{"symlink to another file", func(t *testing.T, e *env, path string) {
			target := filepath.Join(t.TempDir(), "elsewhere")
			b, _ := os.ReadFile(path)
			if err := os.WriteFile(target, b, 0o600); err != nil {
				t.Fatal(err)
			}
			if err := os.Remove(path); err != nil {
				t.Fatal(err)
			}
			if err := os.Symlink(target, path); err != nil {
				t.Fatal(err)
			}
		}, "not a regular file"},
		{"readable by others", func(t *testing.T, e *env, path string) {
			if err := os.Chmod(path, 0o644); err != nil {
				t.Fatal(err)
			}
		}, "lets other users in"},
		{"owned by another user", func(t *testing.T, e *env, path string) {
			if os.Getuid() != 0 {
				t.Fatal("giving a file to another user needs root; these tests run as root")
			}
			if err := os.Chown(path, 65534, 65534); err != nil {
				t.Fatal(err)
			}
		}, "owned by user 65534"},
	}
	for _, tc := range cases {
		for _, when := range []string{"before the scan", "after the scan"} {
			t.Run(tc.name+" "+when, func(t *testing.T) {
				e := newEnv(t)
				c := e.open(t, keyA, 0)
				if err := c.Save(prefix, good); err != nil {
					t.Fatal(err)
				}
				name, _ := c.Lookup(prefix)
				path := filepath.Join(e.dir, name)
				if when == "before the scan" {
					tc.attack(t, e, path)
					c = e.open(t, keyA, 0)
				} else {
					tc.attack(t, e, path)
				}
				if name, n := c.Lookup(prefix); n > 0 {
					got, st, err := c.Load(name)
					if err == nil {
						t.Fatalf("loaded %d tokens and %d state bytes from a hostile file", len(got), len(st))
					}
					if !errors.Is(err, ErrFormat) && tc.want != "" && !strings.Contains(err.Error(), tc.want) {
						t.Fatalf("err %v, want %q", err, tc.want)
					}
				}
				if !strings.Contains(e.log.String(), "cache file refused") {
					t.Fatalf("no log line for the refused file; log:\n%s", e.log.String())
				}
				if tc.want != "" && tc.name != "swapped from another model" && !strings.Contains(e.log.String(), tc.want) {
					t.Fatalf("log lacks %q:\n%s", tc.want, e.log.String())
				}
				if _, n := c.Lookup(prefix); n != 0 {
					t.Fatal("the refused entry is still offered")
				}
				// The cache keeps working: the prefix saves again and loads.
				if err := c.Save(prefix, good); err != nil {
					t.Fatal(err)
				}
				name, _ = c.Lookup(prefix)
				if _, st, err := c.Load(name); err != nil || !bytes.Equal(st, good) {
					t.Fatalf("save after the attack: %v", err)
				}
			})
		}
	}
}

func flip(t *testing.T, path string, off int) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if off < 0 {
		off += len(b)
	}
	b[off] ^= 0x10
	if err := os.WriteFile(path, b, 0o600); err != nil {
		t.Fatal(err)
	}
}
