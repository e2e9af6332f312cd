// Package version holds fac's version, part of every kernel cache key.
package version

import (
	"crypto/sha256"
	"debug/elf"
	"encoding/hex"
	"io"
	"os"
	"runtime/debug"
	"sync"
)

// Version is fac's release version.
const Version = "0.1.0-dev"

// Build identifies the exact build for cache keys, so that a rebuilt
// compiler never reuses kernels a different compiler made: the version,
// the module version and VCS stamps when the build has them, and always
// the executable's identity (its Go build ID, which changes with its
// content; a hash of the file where there is none). The stamps alone are
// not enough: -buildvcs=false drops them, and a modified tree keeps one
// revision across edits.
func Build() string { return build() }

var build = sync.OnceValue(func() string {
	s := Version
	if info, ok := debug.ReadBuildInfo(); ok {
		s += " module=" + info.Main.Version
		for _, kv := range info.Settings {
			switch kv.Key {
			case "vcs.revision", "vcs.time", "vcs.modified":
				s += " " + kv.Key + "=" + kv.Value
			}
		}
	}
	return s + " exe=" + exeID()
})

// exeID is a digest of the running executable's Go build ID note (read
// without loading the whole file), else of the whole file, else "unknown".
func exeID() string {
	p, err := os.Executable()
	if err != nil {
		return "unknown"
	}
	h := sha256.New()
	if f, err := elf.Open(p); err == nil {
		defer f.Close()
		if sec := f.Section(".note.go.buildid"); sec != nil {
			if b, err := sec.Data(); err == nil && len(b) > 0 {
				h.Write(b)
				return hex.EncodeToString(h.Sum(nil)[:12])
			}
		}
	}
	f, err := os.Open(p)
	if err != nil {
		return "unknown"
	}
	defer f.Close()
	if _, err := io.Copy(h, f); err != nil {
		return "unknown"
	}
	return hex.EncodeToString(h.Sum(nil)[:12])
}
