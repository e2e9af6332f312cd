// Package version holds fac's version, part of every kernel cache key.
package version

// Version is fac's release version.
const Version = "0.1.0-dev"
