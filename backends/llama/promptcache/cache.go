package promptcache

import (
	"bufio"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// Defaults of Options.
const (
	DefaultMaxBytes   = 4 << 30
	DefaultMargin     = 1 << 30 // free disk the cache never takes
	DefaultMaxPending = 1 << 30 // state bytes waiting to be written
)

const (
	ext       = ".kv"
	tmpPrefix = ".tmp-"
	// staleTemp is the age at which a temporary file is a crashed writer's.
	staleTemp = time.Hour
)

// Options configure Open.
type Options struct {
	// Dir holds the entries of every model; it is made (0700) when missing.
	Dir string
	// MaxBytes bounds the entries in Dir together (default DefaultMaxBytes).
	MaxBytes int64
	// Margin is the free disk the cache leaves (default DefaultMargin).
	Margin int64
	// MaxPending bounds the state bytes queued by SaveAsync
	// (default DefaultMaxPending); a save beyond it is dropped.
	MaxPending int64
	// Log receives a line for every file refused or removed (default
	// slog.Default()).
	Log *slog.Logger
	// FreeSpace reads the free disk (default FreeSpace; a seam for tests).
	FreeSpace func(dir string) (int64, error)
	// Now is the clock of the LRU (default time.Now).
	Now func() time.Time
}

func (o Options) withDefaults() Options {
	if o.MaxBytes == 0 {
		o.MaxBytes = DefaultMaxBytes
	}
	if o.Margin == 0 {
		o.Margin = DefaultMargin
	}
	if o.MaxPending == 0 {
		o.MaxPending = DefaultMaxPending
	}
	if o.Log == nil {
		o.Log = slog.Default()
	}
	if o.FreeSpace == nil {
		o.FreeSpace = FreeSpace
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	return o
}

// entry is one file of this cache's key.
type entry struct {
	name   string
	tokens []int32
}

// Cache is the entries of one key in a directory. Its methods are safe for
// concurrent use; several processes may share the directory (each removes
// only whole files, and writes through a temporary file and a rename).
type Cache struct {
	dir  string
	key  Key
	opts Options
	log  *slog.Logger

	mu      sync.Mutex // guards entries and ahead
	entries map[string]*entry
	ahead   *prefetch // the read-ahead (prefetch.go); nil: none
	stamp   time.Time // the last time touch gave a file

	jobs    chan job
	pending atomic.Int64
	done    chan struct{}
	close   sync.Once
}

type job struct {
	tokens []int32
	state  []byte
	synced chan struct{} // a Sync's marker: closed when reached
	touch  bool          // mark the entry covering tokens used (TouchAsync)
}

// Open opens the cache of key in o.Dir, making the directory when missing,
// and reads the headers of the entries there. A directory that is a link,
// or that another user owns, is an error; one of this user that others may
// enter is made private.
func Open(o Options, key Key) (*Cache, error) {
	o = o.withDefaults()
	if o.MaxBytes < 0 {
		return nil, fmt.Errorf("promptcache: size bound %d is negative", o.MaxBytes)
	}
	if len(key.Config) > MaxConfig {
		return nil, fmt.Errorf("promptcache: KV configuration of %d bytes is over %d", len(key.Config), MaxConfig)
	}
	if err := privateDir(o.Dir); err != nil {
		return nil, err
	}
	c := &Cache{dir: o.Dir, key: key, opts: o, log: o.Log, entries: map[string]*entry{},
		jobs: make(chan job, 64), done: make(chan struct{})}
	if err := c.scan(); err != nil {
		return nil, err
	}
	go c.writer()
	return c, nil
}

// privateDir makes dir (0700) or checks that it is this user's private
// directory, tightening its mode when others may enter it.
func privateDir(dir string) error {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("promptcache: %w", err)
	}
	fi, err := os.Lstat(dir)
	if err != nil {
		return fmt.Errorf("promptcache: %w", err)
	}
	if !fi.IsDir() {
		return fmt.Errorf("promptcache: %s is not a directory (%s)", dir, fi.Mode().Type())
	}
	if err := owned(fi); err != nil {
		return fmt.Errorf("promptcache: directory %s: %w", dir, err)
	}
	if fi.Mode().Perm()&0o077 != 0 {
		if err := os.Chmod(dir, 0o700); err != nil {
			return fmt.Errorf("promptcache: make %s private: %w", dir, err)
		}
	}
	return nil
}

// scan reads the headers of the directory's entries of c's key, and
// removes stale temporary files and entries that cannot be trusted.
func (c *Cache) scan() error {
	des, err := os.ReadDir(c.dir)
	if err != nil {
		return fmt.Errorf("promptcache: %w", err)
	}
	now := c.opts.Now()
	for _, de := range des {
		name := de.Name()
		path := filepath.Join(c.dir, name)
		if strings.HasPrefix(name, tmpPrefix) {
			if fi, err := de.Info(); err == nil && now.Sub(fi.ModTime()) > staleTemp {
				_ = os.Remove(path)
			}
			continue
		}
		if !strings.HasSuffix(name, ext) {
			continue
		}
		h, err := c.header(path)
		if err != nil {
			c.discard(name, err)
			continue
		}
		if name != entryName(h.Key, h.Tokens) {
			// Renamed or swapped in from another entry (another model's).
			c.discard(name, fmt.Errorf("%w: its name is not its content's", ErrFormat))
			continue
		}
		if h.Key != c.key {
			continue // another model's, or another configuration's
		}
		c.entries[name] = &entry{name: name, tokens: h.Tokens}
	}
	return nil
}

// openEntry opens path as a cache file: a regular file of this user that
// nobody else may use, not through a link. It returns the file and its size.
func openEntry(path string) (*os.File, int64, error) {
	fi, err := os.Lstat(path)
	if err != nil {
		return nil, 0, err
	}
	if !fi.Mode().IsRegular() {
		return nil, 0, fmt.Errorf("not a regular file (%s)", fi.Mode().Type())
	}
	if err := private(fi); err != nil {
		return nil, 0, err
	}
	f, err := os.OpenFile(path, openFlags, 0)
	if err != nil {
		return nil, 0, err
	}
	ffi, err := f.Stat()
	if err == nil && !os.SameFile(fi, ffi) {
		err = errors.New("replaced while opened")
	}
	if err != nil {
		_ = f.Close()
		return nil, 0, err
	}
	return f, ffi.Size(), nil
}

func (c *Cache) header(path string) (Header, error) {
	f, size, err := openEntry(path)
	if err != nil {
		return Header{}, err
	}
	defer f.Close()
	return ReadHeader(bufio.NewReader(f), size)
}

// discard removes an untrusted or unreadable file with a log line.
func (c *Cache) discard(name string, why error) {
	c.mu.Lock()
	delete(c.entries, name)
	c.mu.Unlock()
	err := os.Remove(filepath.Join(c.dir, name))
	c.log.Warn("promptcache: cache file refused", "file", name, "dir", c.dir, "reason", why.Error(), "removed", err == nil)
}

// private reports why fi may not be trusted as this user's private file,
// or nil: another user owns it, or others may read or write it.
func private(fi fs.FileInfo) error {
	if err := owned(fi); err != nil {
		return err
	}
	if perm := fi.Mode().Perm(); perm&0o077 != 0 {
		return fmt.Errorf("mode %#o lets other users in", perm)
	}
	return nil
}

// commonPrefix is the length of the longest common prefix of a and b.
func commonPrefix(a, b []int32) int {
	n := min(len(a), len(b))
	for i := 0; i < n; i++ {
		if a[i] != b[i] {
			return i
		}
	}
	return n
}

// Lookup is the entry sharing the longest prefix with prompt, and that
// prefix's length; n is 0 when none shares a token.
func (c *Cache) Lookup(prompt []int32) (name string, n int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, e := range c.entries {
		if k := commonPrefix(e.tokens, prompt); (k > n || k == n && k > 0 && e.name < name) && c.present(e) {
			name, n = e.name, k
		}
	}
	return name, n
}

// Covers reports whether an entry holds all of tokens (as its prefix).
func (c *Cache) Covers(tokens []int32) bool { return c.Covering(tokens) != "" }

// Covering is the name of an entry that holds all of tokens (as its
// prefix), or "".
func (c *Cache) Covering(tokens []int32) string {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, e := range c.entries {
		if len(e.tokens) >= len(tokens) && commonPrefix(e.tokens, tokens) == len(tokens) && c.present(e) {
			return e.name
		}
	}
	return ""
}

// present reports whether e's file is still there, forgetting e when
// another process removed it (modeld prune --cache, another runner's
// eviction). c.mu is held.
func (c *Cache) present(e *entry) bool {
	if _, err := os.Lstat(filepath.Join(c.dir, e.name)); errors.Is(err, fs.ErrNotExist) {
		delete(c.entries, e.name)
		return false
	}
	return true
}

// Len is the number of entries of c's key.
func (c *Cache) Len() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.entries)
}

// Load reads entry name whole and checks it: the file (see openEntry), its
// header against its length, the key, the checksum, and that its tokens
// are those its header gave when scanned. It returns the tokens and the
// state. A file that fails is removed with a log line. A read-ahead of
// name gives its result instead (prefetch.go).
func (c *Cache) Load(name string) ([]int32, []byte, error) {
	if p := c.takeAhead(name); p != nil {
		return p.tokens, p.state, p.err
	}
	return c.load(name)
}

func (c *Cache) load(name string) ([]int32, []byte, error) {
	c.mu.Lock()
	e := c.entries[name]
	c.mu.Unlock()
	if e == nil {
		return nil, nil, fmt.Errorf("promptcache: no entry %s", name)
	}
	h, state, err := c.read(name)
	if err == nil && !slices.Equal(h.Tokens, e.tokens) {
		err = fmt.Errorf("%w: tokens changed since the scan", ErrFormat)
	}
	if err != nil {
		c.discard(name, err)
		return nil, nil, fmt.Errorf("promptcache: %s: %w", name, err)
	}
	c.touch(name) // the LRU's use
	return h.Tokens, state, nil
}

func (c *Cache) read(name string) (Header, []byte, error) {
	f, size, err := openEntry(filepath.Join(c.dir, name))
	if err != nil {
		return Header{}, nil, err
	}
	defer f.Close()
	return readEntry(bufio.NewReaderSize(f, 64<<10), size, &c.key)
}

// touch sets entry name's times to now, or just after the last time it
// gave when the clock has not moved since (a file system's clock may tick
// in milliseconds): entries touched in turn keep that order (Newest, the
// LRU).
func (c *Cache) touch(name string) {
	c.mu.Lock()
	t := c.opts.Now()
	if !t.After(c.stamp) {
		t = c.stamp.Add(time.Microsecond)
	}
	c.stamp = t
	c.mu.Unlock()
	_ = os.Chtimes(filepath.Join(c.dir, name), t, t)
}

// entryName names the entry of tokens under key.
func entryName(key Key, tokens []int32) string {
	h := sha256.New()
	h.Write(key.Model[:])
	h.Write([]byte(key.Config))
	var b [4]byte
	for _, t := range tokens {
		binary.LittleEndian.PutUint32(b[:], uint32(t))
		h.Write(b[:])
	}
	return hex.EncodeToString(h.Sum(nil)[:16]) + ext
}

// Save writes the entry of tokens with state, unless an entry covers
// tokens already, making room first (see makeRoom). Entries of c's key
// whose tokens are a prefix of these are removed: the new one serves them.
func (c *Cache) Save(tokens []int32, state []byte) error {
	if len(tokens) == 0 || len(tokens) > MaxTokens || len(state) == 0 {
		return fmt.Errorf("promptcache: will not save %d tokens with %d state bytes", len(tokens), len(state))
	}
	if name := c.Covering(tokens); name != "" {
		c.touch(name) // the LRU's use, in the order saves come
		return nil
	}
	size := headerLen(len(c.key.Config), len(tokens)) + int64(len(state)) + sumLen
	if err := c.makeRoom(size); err != nil {
		return err
	}
	f, err := os.CreateTemp(c.dir, tmpPrefix+"*"+ext)
	if err != nil {
		return fmt.Errorf("promptcache: %w", err)
	}
	tmp := f.Name()
	w := bufio.NewWriterSize(f, 1<<20)
	err = writeEntry(w, c.key, tokens, state)
	if err == nil {
		err = w.Flush()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	name := entryName(c.key, tokens)
	if err == nil {
		err = os.Rename(tmp, filepath.Join(c.dir, name))
	}
	if err != nil {
		_ = os.Remove(tmp)
		return fmt.Errorf("promptcache: write an entry of %d tokens: %w", len(tokens), err)
	}
	c.mu.Lock()
	var served []string
	for n, e := range c.entries {
		if n != name && len(e.tokens) < len(tokens) && commonPrefix(e.tokens, tokens) == len(e.tokens) {
			served = append(served, n)
			delete(c.entries, n)
		}
	}
	c.entries[name] = &entry{name: name, tokens: slices.Clone(tokens)}
	c.mu.Unlock()
	c.touch(name)
	for _, n := range served {
		_ = os.Remove(filepath.Join(c.dir, n))
	}
	return nil
}

// Bound is the most bytes the directory's entries may take now: the size
// setting, lowered to what the free disk allows beyond the margin (the
// entries there now count as free, since removing them frees them).
func (c *Cache) Bound() (int64, error) {
	files, err := listEntries(c.dir)
	if err != nil {
		return 0, err
	}
	return c.bound(sumSizes(files)), nil
}

func (c *Cache) bound(held int64) int64 {
	limit := c.opts.MaxBytes
	if free, err := c.opts.FreeSpace(c.dir); err == nil {
		limit = min(limit, held+free-c.opts.Margin)
	}
	return max(limit, 0)
}

// makeRoom removes the least recently used entries of the directory (of
// any key) until size more bytes fit the bound; an entry larger than the
// bound itself is an error, and nothing is removed for it.
func (c *Cache) makeRoom(size int64) error {
	files, err := listEntries(c.dir)
	if err != nil {
		return err
	}
	held := sumSizes(files)
	limit := c.bound(held)
	if size > limit {
		return fmt.Errorf("promptcache: an entry of %d bytes is over the bound of %d (size setting %d, free disk less %d)",
			size, limit, c.opts.MaxBytes, c.opts.Margin)
	}
	slices.SortFunc(files, func(a, b fileInfo) int { return a.mod.Compare(b.mod) })
	for _, f := range files {
		if held+size <= limit {
			break
		}
		if strings.HasPrefix(f.name, tmpPrefix) {
			continue // a save in progress, maybe another process's
		}
		if err := os.Remove(filepath.Join(c.dir, f.name)); err != nil && !errors.Is(err, fs.ErrNotExist) {
			continue
		}
		held -= f.size
		c.mu.Lock()
		delete(c.entries, f.name)
		c.mu.Unlock()
		c.log.Debug("promptcache: evicted", "file", f.name, "bytes", f.size)
	}
	return nil
}
