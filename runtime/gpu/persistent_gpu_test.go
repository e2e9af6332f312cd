//go:build gpu

package gpu

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/fac-compiler/fac/artifact"
	"github.com/fac-compiler/fac/artifact/bundle"
	"github.com/fac-compiler/fac/launch"
	"github.com/fac-compiler/fac/runtime/cuda"
)

// TestPersistentProgramsGPU loads the persistent kernels of the bundles in
// FAC_BUNDLE (a list, like PATH) and checks the program count a launch
// picks for each: a whole number of CTAs per multiprocessor, within what
// one multiprocessor holds (32 CTAs, 2048 threads).
func TestPersistentProgramsGPU(t *testing.T) {
	paths := filepath.SplitList(os.Getenv("FAC_BUNDLE"))
	if len(paths) == 0 {
		t.Skip("no FAC_BUNDLE")
	}
	d, err := Open(0, Config{Arch: os.Getenv("FAC_ARCH")})
	if err != nil {
		t.Fatal(err)
	}
	sms, err := d.Dev.Attribute(cuda.DevAttrMultiprocessorCount)
	if err != nil {
		t.Fatal(err)
	}
	seen := 0
	for _, path := range paths {
		b, err := bundle.Read(path)
		if err != nil {
			t.Fatal(err)
		}
		for i := range b.Kernels {
			a := &b.Kernels[i]
			if a.Ident.Arch != d.Arch || !(&launch.Call{Args: gridArgs(a)}).Persistent() {
				continue
			}
			d.mu.Lock()
			k, err := d.load("", a)
			d.mu.Unlock()
			if err != nil {
				t.Fatal(err)
			}
			n, err := k.persistentPrograms()
			if err != nil {
				t.Fatal(err)
			}
			per := n / sms
			t.Logf("%s %v: %d threads, %d bytes of shared memory: %d programs (%d per SM)", a.Entry, a.Ident.Consts, a.Threads, a.SharedBytes, n, per)
			if n%sms != 0 || per < 1 || per > 32 || per*a.Threads > 2048 {
				t.Errorf("%s: %d programs on %d SMs", a.Entry, n, sms)
			}
			if again, _ := k.persistentPrograms(); again != n {
				t.Errorf("%s: %d programs, then %d", a.Entry, n, again)
			}
			seen++
		}
	}
	if seen == 0 {
		t.Errorf("no persistent kernel for %s in %v", d.Arch, paths)
	}
}

// gridArgs are a's parameters as arguments (for Call.Persistent).
func gridArgs(a *artifact.Artifact) []launch.Arg {
	args := make([]launch.Arg, len(a.Params))
	for i, p := range a.Params {
		args[i] = launch.Arg{Param: p, Buffer: -1}
	}
	return args
}
