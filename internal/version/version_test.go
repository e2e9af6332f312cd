package version

import (
	"strings"
	"testing"
)

// The cache key of a build names the executable, whatever stamps the
// toolchain left out (-buildvcs=false).
func TestBuildNamesTheExecutable(t *testing.T) {
	b := Build()
	if !strings.HasPrefix(b, Version) || !strings.Contains(b, " exe=") || strings.HasSuffix(b, "exe=unknown") {
		t.Fatalf("Build() = %q: want the version and the executable's identity", b)
	}
	if Build() != b {
		t.Fatal("Build() changed within one process")
	}
}
