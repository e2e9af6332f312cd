// Package cache stores compiled kernels (PTX) on disk, keyed by a hash of
// everything that determines the output, so a kernel is compiled once per
// machine rather than once per process.
//
// Each entry is one file <key>.facc in the cache directory: a header with a
// SHA-256 checksum, then a small metadata string (shown by List), then the
// payload. Writes go to a temporary file that is renamed into place, so
// readers never see a partial entry and several processes may write the
// same key at once. A damaged entry (bad checksum, truncated) is deleted and
// reported as Corrupt, which callers treat as a miss.
//
// Memo is the in-memory layer on top, e.g. for modules already loaded into
// the driver.
package cache

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"
)

// EnvDir names the environment variable that overrides the cache directory.
const EnvDir = "FAC_CACHE_DIR"

const (
	magic   = "FACC1"
	ext     = ".facc"
	tmpPfx  = ".tmp-"
	hdrSize = len(magic) + sha256.Size + 8 + 2 // magic, checksum, payload len, meta len
	maxMeta = 1<<16 - 1
)

// Key identifies an entry: the hex SHA-256 of the parts given to NewKey.
type Key string

// NewKey hashes parts into a Key. Each part is length-prefixed, so
// ("ab", "c") and ("a", "bc") give different keys.
func NewKey(parts ...string) Key {
	h := sha256.New()
	var n [8]byte
	for _, p := range parts {
		binary.LittleEndian.PutUint64(n[:], uint64(len(p)))
		h.Write(n[:])
		io.WriteString(h, p)
	}
	return Key(hex.EncodeToString(h.Sum(nil)))
}

// Valid reports whether k looks like a key from NewKey (64 lower-case hex
// digits), which also keeps it safe to use as a file name.
func (k Key) Valid() bool {
	if len(k) != 2*sha256.Size {
		return false
	}
	for _, c := range []byte(k) {
		if !('0' <= c && c <= '9' || 'a' <= c && c <= 'f') {
			return false
		}
	}
	return true
}

// Short returns the first 12 hex digits, for messages.
func (k Key) Short() string {
	if len(k) > 12 {
		return string(k[:12])
	}
	return string(k)
}

// Status says where a result came from.
type Status int

const (
	Miss    Status = iota // not in the cache (built, for GetOrBuild)
	Hit                   // read from the cache
	Corrupt               // the entry was damaged and has been deleted; treat as a miss
)

func (s Status) String() string {
	switch s {
	case Miss:
		return "miss"
	case Hit:
		return "hit"
	case Corrupt:
		return "corrupt"
	}
	return fmt.Sprintf("Status(%d)", int(s))
}

// ErrStore is wrapped by GetOrBuild's error when the payload was built but
// could not be read from or written to the cache; the payload is still
// returned, so callers may just warn.
var ErrStore = errors.New("cache: cannot store entry")

// Cache is a cache directory. It is safe for concurrent use.
type Cache struct {
	dir    string
	mu     sync.Mutex
	flying map[Key]*flight
}

type flight struct {
	done chan struct{}
	data []byte
	st   Status
	err  error
}

// DefaultDir returns $FAC_CACHE_DIR if set, else <user cache dir>/fac.
func DefaultDir() (string, error) {
	if d := os.Getenv(EnvDir); d != "" {
		return d, nil
	}
	d, err := os.UserCacheDir()
	if err != nil {
		return "", fmt.Errorf("cache: no cache directory (set %s): %w", EnvDir, err)
	}
	return filepath.Join(d, "fac"), nil
}

// Open returns the cache in dir, creating the directory if needed. An
// empty dir means DefaultDir().
func Open(dir string) (*Cache, error) {
	if dir == "" {
		var err error
		if dir, err = DefaultDir(); err != nil {
			return nil, err
		}
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("cache: %w", err)
	}
	return &Cache{dir: dir, flying: map[Key]*flight{}}, nil
}

// Dir returns the cache directory.
func (c *Cache) Dir() string { return c.dir }

func (c *Cache) path(key Key) (string, error) {
	if !key.Valid() {
		return "", fmt.Errorf("cache: invalid key %q", key)
	}
	return filepath.Join(c.dir, string(key)+ext), nil
}

// encode builds the on-disk form of an entry.
func encode(meta string, payload []byte) []byte {
	sum := sha256.Sum256(payload)
	b := make([]byte, 0, hdrSize+len(meta)+len(payload))
	b = append(b, magic...)
	b = append(b, sum[:]...)
	b = binary.LittleEndian.AppendUint64(b, uint64(len(payload)))
	b = binary.LittleEndian.AppendUint16(b, uint16(len(meta)))
	b = append(b, meta...)
	return append(b, payload...)
}

// decodeHeader parses the header and metadata, returning the expected
// checksum and payload length.
func decodeHeader(b []byte) (sum []byte, payloadLen uint64, meta string, rest []byte, err error) {
	if len(b) < hdrSize || string(b[:len(magic)]) != magic {
		return nil, 0, "", nil, errors.New("bad header")
	}
	sum = b[len(magic) : len(magic)+sha256.Size]
	payloadLen = binary.LittleEndian.Uint64(b[len(magic)+sha256.Size:])
	metaLen := int(binary.LittleEndian.Uint16(b[hdrSize-2:]))
	if len(b) < hdrSize+metaLen {
		return nil, 0, "", nil, errors.New("truncated metadata")
	}
	return sum, payloadLen, string(b[hdrSize : hdrSize+metaLen]), b[hdrSize+metaLen:], nil
}

// decode checks a whole entry and returns its payload.
func decode(b []byte) (payload []byte, meta string, err error) {
	sum, n, meta, rest, err := decodeHeader(b)
	if err != nil {
		return nil, "", err
	}
	if uint64(len(rest)) != n {
		return nil, "", fmt.Errorf("payload is %d bytes, header says %d", len(rest), n)
	}
	if got := sha256.Sum256(rest); !bytes.Equal(got[:], sum) {
		return nil, "", errors.New("checksum mismatch")
	}
	return rest, meta, nil
}

// Get returns the payload stored under key. A missing entry gives Miss; a
// damaged one is deleted and gives Corrupt. Both return a nil payload and
// nil error; err is for I/O failures only.
func (c *Cache) Get(key Key) ([]byte, Status, error) {
	p, err := c.path(key)
	if err != nil {
		return nil, Miss, err
	}
	b, err := os.ReadFile(p)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, Miss, nil
	}
	if err != nil {
		return nil, Miss, fmt.Errorf("cache: %w", err)
	}
	payload, _, err := decode(b)
	if err != nil {
		// Another process may have just replaced it with a good entry;
		// removing that costs only a rebuild.
		if rerr := os.Remove(p); rerr != nil && !errors.Is(rerr, fs.ErrNotExist) {
			return nil, Corrupt, fmt.Errorf("cache: removing corrupt entry: %w", rerr)
		}
		return nil, Corrupt, nil
	}
	return payload, Hit, nil
}

// Put stores payload under key with a metadata string (e.g. kernel name
// and mask) that List shows. It writes a temporary file and renames it into
// place, so concurrent writers and readers are safe.
func (c *Cache) Put(key Key, meta string, payload []byte) error {
	p, err := c.path(key)
	if err != nil {
		return err
	}
	if len(meta) > maxMeta {
		return fmt.Errorf("cache: metadata is %d bytes, max %d", len(meta), maxMeta)
	}
	f, err := os.CreateTemp(c.dir, tmpPfx+key.Short()+"-*")
	if err != nil {
		return fmt.Errorf("cache: %w", err)
	}
	tmp := f.Name()
	// No fsync: after a crash a torn entry fails its checksum and is
	// rebuilt, which is cheaper than syncing every write.
	_, err = f.Write(encode(meta, payload))
	if err == nil {
		err = f.Chmod(0o644)
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp, p)
	}
	if err != nil {
		os.Remove(tmp)
		return fmt.Errorf("cache: %w", err)
	}
	return nil
}

// GetOrBuild returns the cached payload for key, or calls build, stores
// its result with meta and returns it with status Miss (or Corrupt if a
// damaged entry was replaced). Concurrent calls for the same key in this
// process share one build and get the same slice, which must not be
// modified. If build succeeds but the cache cannot be used, the payload is
// returned with an error wrapping ErrStore.
func (c *Cache) GetOrBuild(key Key, meta string, build func() ([]byte, error)) ([]byte, Status, error) {
	if !key.Valid() {
		return nil, Miss, fmt.Errorf("cache: invalid key %q", key)
	}
	c.mu.Lock()
	if f, ok := c.flying[key]; ok {
		c.mu.Unlock()
		<-f.done
		return f.data, f.st, f.err
	}
	f := &flight{done: make(chan struct{})}
	c.flying[key] = f
	c.mu.Unlock()

	finished := false
	defer func() {
		if !finished { // build panicked: release waiters, then keep panicking
			f.err = errPanicked
		}
		c.mu.Lock()
		delete(c.flying, key)
		c.mu.Unlock()
		close(f.done)
	}()
	f.data, f.st, f.err = c.getOrBuild(key, meta, build)
	finished = true
	return f.data, f.st, f.err
}

func (c *Cache) getOrBuild(key Key, meta string, build func() ([]byte, error)) ([]byte, Status, error) {
	data, st, getErr := c.Get(key)
	if getErr == nil && st == Hit {
		return data, Hit, nil
	}
	data, err := build()
	if err != nil {
		return nil, st, err
	}
	if getErr != nil {
		return data, st, fmt.Errorf("%w: %w", ErrStore, getErr)
	}
	if err := c.Put(key, meta, data); err != nil {
		return data, st, fmt.Errorf("%w: %w", ErrStore, err)
	}
	return data, st, nil
}

// Entry describes a cache entry for List.
type Entry struct {
	Key     Key
	Size    int64 // file size in bytes
	ModTime time.Time
	Meta    string // "<corrupt>" if the header cannot be read
}

// List returns the entries in the cache directory, oldest first. It reads
// only headers; checksums are verified by Get.
func (c *Cache) List() ([]Entry, error) {
	des, err := os.ReadDir(c.dir)
	if err != nil {
		return nil, fmt.Errorf("cache: %w", err)
	}
	var out []Entry
	for _, de := range des {
		key := Key(strings.TrimSuffix(de.Name(), ext))
		if !strings.HasSuffix(de.Name(), ext) || !key.Valid() || !de.Type().IsRegular() {
			continue
		}
		info, err := de.Info()
		if err != nil {
			continue // removed meanwhile
		}
		out = append(out, Entry{Key: key, Size: info.Size(), ModTime: info.ModTime(), Meta: readMeta(filepath.Join(c.dir, de.Name()))})
	}
	slices.SortFunc(out, func(a, b Entry) int { return a.ModTime.Compare(b.ModTime) })
	return out, nil
}

func readMeta(path string) string {
	f, err := os.Open(path)
	if err != nil {
		return "<corrupt>"
	}
	defer f.Close()
	b := make([]byte, hdrSize)
	if _, err := io.ReadFull(f, b); err != nil {
		return "<corrupt>"
	}
	b = append(b, make([]byte, binary.LittleEndian.Uint16(b[hdrSize-2:]))...)
	if _, err := io.ReadFull(f, b[hdrSize:]); err != nil {
		return "<corrupt>"
	}
	_, _, meta, _, err := decodeHeader(b)
	if err != nil {
		return "<corrupt>"
	}
	return meta
}

// Clear removes every entry and leftover temporary file. Other files in
// the directory are left alone, in case it is shared.
func (c *Cache) Clear() error {
	des, err := os.ReadDir(c.dir)
	if err != nil {
		return fmt.Errorf("cache: %w", err)
	}
	var errs []error
	for _, de := range des {
		name := de.Name()
		ours := strings.HasPrefix(name, tmpPfx) || strings.HasSuffix(name, ext) && Key(strings.TrimSuffix(name, ext)).Valid()
		if !ours || de.IsDir() {
			continue
		}
		if err := os.Remove(filepath.Join(c.dir, name)); err != nil && !errors.Is(err, fs.ErrNotExist) {
			errs = append(errs, err)
		}
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("cache: %w", err)
	}
	return nil
}
