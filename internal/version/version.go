// Package version holds fac's version, part of every kernel cache key.
package version

import "runtime/debug"

// Version is fac's release version.
const Version = "0.1.0-dev"

// Build identifies the exact build for cache keys: the version plus the VCS
// revision and dirty flag that `go build` stamps, so a rebuilt compiler
// never reuses kernels a different compiler made.
func Build() string { return build }

var build = func() string {
	s := Version
	info, ok := debug.ReadBuildInfo()
	if !ok {
		return s
	}
	for _, kv := range info.Settings {
		switch kv.Key {
		case "vcs.revision", "vcs.time", "vcs.modified":
			s += " " + kv.Key + "=" + kv.Value
		}
	}
	return s
}()
