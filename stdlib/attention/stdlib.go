// Package attention holds fac's standard library: the stock attention
// kernels and mods, written in the tile language and embedded in the binary.
package attention

import (
	"embed"
	"io/fs"
	"sort"
	"sync"

	"github.com/fac-compiler/fac/lang"
	"github.com/fac-compiler/fac/parser"
)

//go:embed *.fa
var files embed.FS

// Files returns the stdlib sources by file name ("stdlib/attention/masks.fa").
func Files() map[string]string {
	out := map[string]string{}
	names, _ := fs.Glob(files, "*.fa")
	for _, n := range names {
		b, _ := files.ReadFile(n)
		out["stdlib/attention/"+n] = string(b)
	}
	return out
}

// Load parses the stdlib and any user sources (name → text) into one program.
// A user file named like a stdlib file ("stdlib/attention/masks.fa")
// replaces it, so `fac check` works on the stdlib's own files and on edited
// copies of them.
func Load(user map[string]string) (*lang.Program, error) {
	p := lang.NewProgram()
	std := Files()
	parseStdOnce.Do(func() { parseAllStd(std) })
	for n := range user {
		delete(std, n)
	}
	for i, set := range []map[string]string{std, user} {
		names := make([]string, 0, len(set))
		for n := range set {
			names = append(names, n)
		}
		sort.Strings(names)
		for _, n := range names {
			var f *lang.File
			var err error
			if i == 0 {
				f, err = parseStd(n, set[n])
			} else {
				f, err = parser.ParseFile(n, set[n])
			}
			if err != nil {
				return nil, err
			}
			if err := p.Add(n, set[n], f); err != nil {
				return nil, err
			}
		}
	}
	return p, nil
}

// stdParsed holds the stdlib's files parsed once per process (filename →
// *lang.File): they are embedded, so they never change, and the syntax tree
// is only read after parsing. Parsing them is most of a compile's front end
// (about 0.1 s for the 14 files), which a build of many kernels would
// otherwise pay for every kernel.
var stdParsed sync.Map

// parseStdOnce: the first Load parses every stdlib file at once, one
// goroutine each (participle parsers are safe for concurrent use), so a
// cold compile waits for the largest file, not for the sum. A file that
// fails is parsed again, in order, by Load, which reports the error.
var parseStdOnce sync.Once

func parseAllStd(std map[string]string) {
	var wg sync.WaitGroup
	for n, src := range std {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, _ = parseStd(n, src)
		}()
	}
	wg.Wait()
}

func parseStd(name, src string) (*lang.File, error) {
	if f, ok := stdParsed.Load(name); ok {
		return f.(*lang.File), nil
	}
	f, err := parser.ParseFile(name, src)
	if err != nil {
		return nil, err
	}
	stdParsed.Store(name, f)
	return f, nil
}
