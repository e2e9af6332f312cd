package cache

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// The cross-process build lock of a key (see the package comment). A lock
// is a file .facc-lock-<key> created with O_EXCL and holding lockMagic and
// the holder's pid and host; the holder refreshes its modification time
// every lockBeat while it builds and removes it when done. A lock not
// refreshed for staleLock belongs to a process that died or hangs and may
// be broken; a waiter gives up after maxLockWait and builds anyway.
// Variables so that tests can shorten them.
var (
	lockBeat    = time.Second
	staleLock   = 15 * time.Second
	maxLockWait = 5 * time.Minute
	lockPoll    = 100 * time.Millisecond // the longest pause between two looks
)

// lockMagic starts every lock file, so that Clear recognises fac's locks.
const lockMagic = "fac cache build lock\n"

func (c *Cache) lockPath(key Key) string { return filepath.Join(c.dir, lockPfx+string(key)) }

// lock takes key's build lock. While another process holds it, lock waits,
// calling hit between looks: when hit reports that the entry has appeared,
// lock returns found. Otherwise it returns once the lock is taken (or
// cannot be: a folder where no file can be made, a wait past maxLockWait),
// with unlock to call after the build. hit is also called once the lock is
// taken, for an entry written between the caller's miss and the lock.
func (c *Cache) lock(key Key, hit func() bool) (unlock func(), found bool) {
	p := c.lockPath(key)
	nothing := func() {}
	deadline := time.Now().Add(maxLockWait)
	pause := 5 * time.Millisecond
	for {
		f, err := os.OpenFile(p, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
		if err == nil {
			host, _ := os.Hostname()
			_, werr := fmt.Fprintf(f, "%spid %d\nhost %s\n", lockMagic, os.Getpid(), host)
			fi, serr := f.Stat()
			if cerr := f.Close(); werr == nil {
				werr = cerr
			}
			if werr != nil || serr != nil {
				os.Remove(p)
				return nothing, false
			}
			release := c.hold(p, fi)
			if hit() {
				release()
				return nothing, true
			}
			return release, false
		}
		if !errors.Is(err, fs.ErrExist) {
			return nothing, false // no lock can be made here: build without one
		}
		if hit() {
			return nothing, true
		}
		if fi, err := os.Lstat(p); err == nil && time.Since(fi.ModTime()) > staleLock {
			breakLock(p, fi)
			continue
		}
		if time.Now().After(deadline) {
			return nothing, false
		}
		time.Sleep(pause)
		pause = min(2*pause, lockPoll)
	}
}

// hold keeps the lock file p (whose stat is fi) fresh until the returned
// function is called, which removes it if it is still this holder's.
func (c *Cache) hold(p string, fi fs.FileInfo) func() {
	stop, done := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(done)
		t := time.NewTicker(lockBeat)
		defer t.Stop()
		for {
			select {
			case <-stop:
				return
			case <-t.C:
				if cur, err := os.Lstat(p); err != nil || !os.SameFile(cur, fi) {
					return // broken or cleared: no longer ours
				}
				now := time.Now()
				os.Chtimes(p, now, now)
			}
		}
	}()
	return func() {
		close(stop)
		<-done
		if cur, err := os.Lstat(p); err == nil && os.SameFile(cur, fi) {
			os.Remove(p)
		}
	}
}

// breakLock removes the stale lock p, seen as fi, unless it has meanwhile
// been replaced or refreshed. Two waiters may both break it; the worst
// that follows is two builds of one key, which the cache tolerates.
func breakLock(p string, fi fs.FileInfo) {
	cur, err := os.Lstat(p)
	if err != nil || !os.SameFile(cur, fi) || !cur.ModTime().Equal(fi.ModTime()) {
		return
	}
	os.Remove(p)
}

// isStaleLock reports whether the file p named name is a build lock of
// fac's that no live build refreshes: a key's name after the lock prefix,
// lockMagic at its start (or nothing: a holder that died before writing),
// and a modification time older than staleLock.
func isStaleLock(p, name string) bool {
	if !Key(strings.TrimPrefix(name, lockPfx)).Valid() {
		return false
	}
	fi, err := os.Lstat(p)
	if err != nil || time.Since(fi.ModTime()) <= staleLock {
		return false
	}
	b, err := readPrefix(p, len(lockMagic))
	return err == nil && (len(b) == 0 || string(b) == lockMagic)
}
