// Package cache stores compiled kernels (PTX) on disk, keyed by a hash of
// everything that determines the output, so a kernel is compiled once per
// machine rather than once per process.
//
// Each entry is one file <key>.facc in the cache directory: a header with a
// SHA-256 checksum and the entry's own key, then a small metadata string
// (shown by List), then the payload. Writes go to a temporary file that is
// renamed into place, so readers never see a partial entry and several
// processes may write the same key at once. A damaged entry (bad checksum,
// truncated, stored under another key's name, or rejected by the caller's
// validate function) is deleted and reported as Corrupt, which callers treat
// as a miss. Entries of an older format are misses.
//
// GetOrBuild builds a key at most once at a time: within a process by
// sharing the build, across processes by a lock file per key
// (.facc-lock-<key>, created with O_EXCL, its time refreshed while the
// build runs). A process that finds the lock waits for the entry; a lock
// left by a process that died (not refreshed for staleLock) is broken, and
// a wait longer than maxLockWait builds anyway, so the lock only saves
// work and never blocks a compile for good. A folder where no lock can be
// made (read-only) builds without one.
//
// fac's own files in the folder are recognised by name and content: entries
// (<64 hex digits>.facc), temporary files (.facc-tmp-<12 hex digits>-<digits>,
// empty or starting with the entry magic) and locks (.facc-lock-<key>,
// starting with lockMagic). Clear removes only those.
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
	"sync/atomic"
	"time"
)

// EnvDir names the environment variable users name the cache directory
// with (read at the API boundary, which passes it to Open).
const EnvDir = "FAC_CACHE_DIR"

// On-disk layout: magic | SHA-256 of everything after it | key (32 bytes) |
// payload length (8) | meta length (2) | meta | payload. The key is stored so
// that a file renamed or copied to another key's name is not served for
// that key; the checksum covers it so a damaged key reads as corrupt.
const (
	magicPfx = "FACC"
	magic    = magicPfx + "3" // bumped whenever the layout, or the meaning of a payload, changes (3: artifacts carry a digest of their metadata)
	ext      = ".facc"
	tmpPfx   = ".facc-tmp-"
	lockPfx  = ".facc-lock-"
	keyOff   = len(magic) + sha256.Size
	hdrSize  = keyOff + sha256.Size + 8 + 2
	maxMeta  = 1<<16 - 1
	// maxEntry bounds what Get reads and Put writes, so a stray huge file in
	// the cache folder cannot exhaust memory; PTX and cubins are a few MB.
	maxEntry = 256 << 20
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
	// Warn receives the one-line warning printed the first time GetOrBuild
	// or GetOrBuildChecked cannot read or write the folder (read-only, full
	// disk); the build's result is still returned. Nil means os.Stderr,
	// where the warning is printed once per process; with a Warn writer,
	// once per Cache. Set it before the Cache is used.
	Warn io.Writer

	dir    string
	mu     sync.Mutex
	flying map[Key]*flight
	warned atomic.Bool
}

// stderr is where warnings go when Cache.Warn is nil; a variable for tests.
var stderr io.Writer = os.Stderr

// stderrWarned makes the default warning once per process: several Caches
// may share one unusable folder.
var stderrWarned atomic.Bool

// warnStore reports a failure to use the folder, once, so that a read-only
// cache is not silent but does not flood the output either.
func (c *Cache) warnStore(err error) {
	if c.warned.Swap(true) {
		return
	}
	w := c.Warn
	if w == nil {
		if stderrWarned.Swap(true) {
			return
		}
		w = stderr
	}
	fmt.Fprintf(w, "fac: warning: kernel cache %s is not usable, compiling without it: %v\n", c.dir, err)
}

type flight struct {
	done chan struct{}
	data []byte
	st   Status
	err  error
}

// DefaultDir returns <user cache dir>/fac.
func DefaultDir() (string, error) {
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

// Locate returns the cache in dir (empty: DefaultDir()) without creating
// anything, for looking at it: while the folder does not exist, Get
// misses, List finds no entries and Clear has nothing to remove.
func Locate(dir string) (*Cache, error) {
	if dir == "" {
		var err error
		if dir, err = DefaultDir(); err != nil {
			return nil, err
		}
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

// encode builds the on-disk form of an entry; key must be Valid.
func encode(key Key, meta string, payload []byte) []byte {
	b := make([]byte, keyOff, hdrSize+len(meta)+len(payload))
	copy(b, magic)
	kb, _ := hex.DecodeString(string(key))
	b = append(b, kb...)
	b = binary.LittleEndian.AppendUint64(b, uint64(len(payload)))
	b = binary.LittleEndian.AppendUint16(b, uint16(len(meta)))
	b = append(b, meta...)
	b = append(b, payload...)
	sum := sha256.Sum256(b[keyOff:])
	copy(b[len(magic):], sum[:])
	return b
}

// errOldFormat marks an entry written by another version of the layout:
// a miss, not damage.
var errOldFormat = errors.New("old cache format")

// header is an entry's parsed header.
type header struct {
	sum        []byte
	key        Key
	payloadLen uint64
	meta       string
}

// decodeHeader parses the header and metadata; rest is what follows them.
func decodeHeader(b []byte) (h header, rest []byte, err error) {
	if len(b) < len(magic) || string(b[:len(magic)]) != magic {
		if len(b) >= len(magic) && string(b[:len(magicPfx)]) == magicPfx {
			return h, nil, errOldFormat
		}
		return h, nil, errors.New("bad header")
	}
	if len(b) < hdrSize {
		return h, nil, errors.New("truncated header")
	}
	h.sum = b[len(magic):keyOff]
	h.key = Key(hex.EncodeToString(b[keyOff : keyOff+sha256.Size]))
	h.payloadLen = binary.LittleEndian.Uint64(b[keyOff+sha256.Size:])
	metaLen := int(binary.LittleEndian.Uint16(b[hdrSize-2:]))
	if len(b) < hdrSize+metaLen {
		return h, nil, errors.New("truncated metadata")
	}
	h.meta = string(b[hdrSize : hdrSize+metaLen])
	return h, b[hdrSize+metaLen:], nil
}

// decode checks a whole entry read from key's file and returns its payload.
func decode(key Key, b []byte) (payload []byte, meta string, err error) {
	h, rest, err := decodeHeader(b)
	if err != nil {
		return nil, "", err
	}
	if uint64(len(rest)) != h.payloadLen {
		return nil, "", fmt.Errorf("payload is %d bytes, header says %d", len(rest), h.payloadLen)
	}
	if got := sha256.Sum256(b[keyOff:]); !bytes.Equal(got[:], h.sum) {
		return nil, "", errors.New("checksum mismatch")
	}
	if h.key != key {
		return nil, "", fmt.Errorf("entry is for key %s", h.key.Short())
	}
	return rest, h.meta, nil
}

// readEntry reads an entry file. Anything but a regular file of at most
// maxEntry bytes is reported as damage (errBadFile) rather than read: a
// FIFO would block and a huge file would exhaust memory.
func readEntry(p string) ([]byte, error) {
	st, err := os.Stat(p)
	if err != nil {
		return nil, err
	}
	if !st.Mode().IsRegular() || st.Size() > maxEntry {
		return nil, errBadFile
	}
	return os.ReadFile(p)
}

var errBadFile = errors.New("not a regular file of a plausible size")

// Get returns the payload stored under key. A missing entry, or one of an
// older format, gives Miss; a damaged one (including one stored under a
// different key) is deleted and gives Corrupt. Both return a nil payload
// and nil error; err is for I/O failures only.
func (c *Cache) Get(key Key) ([]byte, Status, error) {
	return c.get(key, nil)
}

// get is Get with the caller's check of the payload: an entry that fails
// validate is damaged too.
func (c *Cache) get(key Key, validate func([]byte) error) ([]byte, Status, error) {
	p, err := c.path(key)
	if err != nil {
		return nil, Miss, err
	}
	b, err := readEntry(p)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, Miss, nil
	}
	if err != nil && err != errBadFile {
		return nil, Miss, fmt.Errorf("cache: %w", err)
	}
	var payload []byte
	if err == nil {
		payload, _, err = decode(key, b)
	}
	if err == errOldFormat {
		os.Remove(p) // Put would replace it anyway; failing here is harmless
		return nil, Miss, nil
	}
	if err == nil && validate != nil {
		err = validate(payload)
	}
	if err != nil {
		if rerr := c.remove(p); rerr != nil {
			return nil, Corrupt, fmt.Errorf("cache: removing corrupt entry: %w", rerr)
		}
		return nil, Corrupt, nil
	}
	return payload, Hit, nil
}

// Remove deletes key's entry, e.g. one whose payload the caller cannot
// decode after a Get, so that it is rebuilt rather than failing every
// compile. A missing entry is not an error.
func (c *Cache) Remove(key Key) error {
	p, err := c.path(key)
	if err != nil {
		return err
	}
	if err := c.remove(p); err != nil {
		return fmt.Errorf("cache: %w", err)
	}
	return nil
}

// remove deletes an entry file. Another process may have just replaced it
// with a good entry; removing that costs only a rebuild.
func (c *Cache) remove(p string) error {
	if err := os.Remove(p); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	return nil
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
	if hdrSize+len(meta)+len(payload) > maxEntry {
		return fmt.Errorf("cache: entry is %d bytes, max %d", hdrSize+len(meta)+len(payload), maxEntry)
	}
	f, err := os.CreateTemp(c.dir, tmpPfx+key.Short()+"-*") // see isTemp
	if err != nil {
		return fmt.Errorf("cache: %w", err)
	}
	tmp := f.Name()
	// No fsync: after a crash a torn entry fails its checksum and is
	// rebuilt, which is cheaper than syncing every write.
	_, err = f.Write(encode(key, meta, payload))
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
// returned with an error wrapping ErrStore, and the Cache warns once (see
// Warn), so callers may ignore such errors.
func (c *Cache) GetOrBuild(key Key, meta string, build func() ([]byte, error)) ([]byte, Status, error) {
	return c.GetOrBuildChecked(key, meta, build, nil)
}

// GetOrBuildChecked is GetOrBuild with the caller's check of a payload,
// e.g. that it decodes as an artifact for the requested kernel and arch.
// A cached payload that fails validate is deleted and rebuilt (status
// Corrupt); a built payload that fails it is an error and is not stored,
// since the builder contradicts its own check. A nil validate accepts all.
func (c *Cache) GetOrBuildChecked(key Key, meta string, build func() ([]byte, error), validate func([]byte) error) ([]byte, Status, error) {
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
	f.data, f.st, f.err = c.getOrBuild(key, meta, build, validate)
	finished = true
	return f.data, f.st, f.err
}

func (c *Cache) getOrBuild(key Key, meta string, build func() ([]byte, error), validate func([]byte) error) ([]byte, Status, error) {
	data, st, getErr := c.get(key, validate)
	if getErr == nil && st == Hit {
		return data, Hit, nil
	}
	if getErr == nil {
		// Another process may be building this key: wait for its entry,
		// or take the lock and build.
		hit := func() bool {
			d, s, err := c.get(key, validate)
			if err == nil && s == Hit {
				data = d
				return true
			}
			return false
		}
		unlock, found := c.lock(key, hit)
		if found {
			return data, Hit, nil
		}
		defer unlock()
	}
	data, err := build()
	if err != nil {
		return nil, st, err
	}
	if validate != nil {
		if err := validate(data); err != nil {
			return nil, st, fmt.Errorf("cache: built entry %s fails its check: %w", key.Short(), err)
		}
	}
	if getErr == nil {
		getErr = c.Put(key, meta, data)
	}
	if getErr != nil {
		c.warnStore(getErr)
		return data, st, fmt.Errorf("%w: %w", ErrStore, getErr)
	}
	return data, st, nil
}

// Entry describes a cache entry for List.
type Entry struct {
	Key     Key
	Size    int64 // file size in bytes
	ModTime time.Time
	Meta    string // "<corrupt>" if the header cannot be read or names another key, "<old format>" if stale
}

// List returns the entries in the cache directory, oldest first; none when
// the folder does not exist. It reads only headers; checksums are verified
// by Get.
func (c *Cache) List() ([]Entry, error) {
	des, err := os.ReadDir(c.dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
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
		out = append(out, Entry{Key: key, Size: info.Size(), ModTime: info.ModTime(), Meta: readMeta(key, filepath.Join(c.dir, de.Name()))})
	}
	slices.SortFunc(out, func(a, b Entry) int { return a.ModTime.Compare(b.ModTime) })
	return out, nil
}

func readMeta(key Key, path string) string {
	f, err := os.Open(path) // List skips non-regular files, so this cannot block on a FIFO
	if err != nil {
		return "<corrupt>"
	}
	defer f.Close()
	b := make([]byte, hdrSize)
	n, _ := io.ReadFull(f, b)
	if n >= len(magic) && string(b[:len(magicPfx)]) == magicPfx && string(b[:len(magic)]) != magic {
		return "<old format>"
	}
	if n < hdrSize {
		return "<corrupt>"
	}
	b = append(b, make([]byte, binary.LittleEndian.Uint16(b[hdrSize-2:]))...)
	if _, err := io.ReadFull(f, b[hdrSize:]); err != nil {
		return "<corrupt>"
	}
	h, _, err := decodeHeader(b)
	if err != nil || h.key != key {
		return "<corrupt>"
	}
	return h.meta
}

// Clear removes every entry, leftover temporary file and stale lock (see
// the package comment for how fac's files are recognised). Other files in
// the directory, a user's ".tmp-notes" included, are left alone, in case
// it is shared; so is the lock of a build still running. A folder that
// does not exist is already clear.
func (c *Cache) Clear() error {
	des, err := os.ReadDir(c.dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("cache: %w", err)
	}
	var errs []error
	for _, de := range des {
		name := de.Name()
		if !de.Type().IsRegular() {
			continue
		}
		p := filepath.Join(c.dir, name)
		ours := false
		switch {
		case strings.HasSuffix(name, ext):
			ours = Key(strings.TrimSuffix(name, ext)).Valid()
		case strings.HasPrefix(name, tmpPfx) || strings.HasPrefix(name, oldTmpPfx):
			ours = isTemp(p, name)
		case strings.HasPrefix(name, lockPfx):
			ours = isStaleLock(p, name)
		}
		if !ours {
			continue
		}
		if err := os.Remove(p); err != nil && !errors.Is(err, fs.ErrNotExist) {
			errs = append(errs, err)
		}
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("cache: %w", err)
	}
	return nil
}

// oldTmpPfx is the temporary-file prefix of FACC2 and earlier caches.
const oldTmpPfx = ".tmp-"

// isTemp reports whether the file p named name is one of Put's temporary
// files: its name is a temporary prefix, the key's 12 hex digits, a dash and
// os.CreateTemp's digits, and it is empty (created, not yet written) or
// starts with an entry's magic.
func isTemp(p, name string) bool {
	rest, ok := strings.CutPrefix(name, tmpPfx)
	if !ok {
		rest, ok = strings.CutPrefix(name, oldTmpPfx)
	}
	short, digits, ok2 := strings.Cut(rest, "-")
	if !ok || !ok2 || len(short) != 12 || !isDigits(digits) || strings.Trim(short, "0123456789abcdef") != "" {
		return false
	}
	b, err := readPrefix(p, len(magicPfx))
	return err == nil && (len(b) == 0 || string(b) == magicPfx)
}

func isDigits(s string) bool {
	if s == "" {
		return false
	}
	for _, c := range []byte(s) {
		if c < '0' || c > '9' {
			return false
		}
	}
	return true
}

// readPrefix reads at most n bytes from the start of the regular file p.
func readPrefix(p string, n int) ([]byte, error) {
	f, err := os.Open(p) // callers pass regular files only: no FIFO blocks here
	if err != nil {
		return nil, err
	}
	defer f.Close()
	b := make([]byte, n)
	k, err := io.ReadFull(f, b)
	if err == io.ErrUnexpectedEOF || err == io.EOF {
		err = nil
	}
	return b[:k], err
}
