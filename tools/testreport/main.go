// Command testreport reads `go test -json` from standard input and prints
// what a person needs from a run: each package's result as `go test`
// prints it, the output of every failed test, and the ten slowest tests.
// It exits 1 when a test or a package failed, or when the input has no
// test events at all.
//
//	go test -json ./... | go run ./tools/testreport
package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"sort"
	"strings"
)

// event is one line of test2json's output.
type event struct {
	Action  string
	Package string
	Test    string
	Elapsed float64
	Output  string
}

type testKey struct{ pkg, test string }

func main() {
	os.Exit(report(os.Stdin, os.Stdout, 10))
}

// report reads events from r, writes the report to w and returns the exit
// status.
func report(r io.Reader, w io.Writer, slowest int) int {
	out := map[testKey][]string{}
	var failed []testKey
	type timing struct {
		key     testKey
		elapsed float64
	}
	var times []timing
	var pkgLines []string
	status, events := 0, 0
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 1<<20), 1<<26)
	for sc.Scan() {
		line := sc.Bytes()
		var e event
		if err := json.Unmarshal(line, &e); err != nil || e.Action == "" {
			// Build errors and the like arrive as plain text.
			fmt.Fprintln(w, string(line))
			continue
		}
		events++
		k := testKey{e.Package, e.Test}
		switch e.Action {
		case "output":
			out[k] = append(out[k], e.Output)
		case "fail":
			status = 1
			if e.Test != "" {
				failed = append(failed, k)
			} else {
				pkgLines = append(pkgLines, fmt.Sprintf("FAIL\t%s\t%.1fs", e.Package, e.Elapsed))
				if len(out[k]) > 0 {
					failed = append(failed, k)
				}
			}
		case "pass", "skip":
			if e.Test == "" {
				word := "ok  "
				if e.Action == "skip" {
					word = "?   "
				}
				pkgLines = append(pkgLines, fmt.Sprintf("%s\t%s\t%.1fs", word, e.Package, e.Elapsed))
			} else if !strings.Contains(e.Test, "/") {
				times = append(times, timing{k, e.Elapsed})
			}
			if e.Action == "pass" {
				delete(out, k)
			}
		}
	}
	if err := sc.Err(); err != nil {
		fmt.Fprintf(w, "testreport: reading the test events: %v\n", err)
		return 1
	}
	for _, k := range failed {
		name := k.pkg
		if k.test != "" {
			name += " " + k.test
		}
		fmt.Fprintf(w, "--- FAIL: %s\n%s", name, strings.Join(out[k], ""))
	}
	sort.Strings(pkgLines)
	for _, l := range pkgLines {
		fmt.Fprintln(w, l)
	}
	sort.Slice(times, func(i, j int) bool { return times[i].elapsed > times[j].elapsed })
	if len(times) > slowest {
		times = times[:slowest]
	}
	if len(times) > 0 {
		fmt.Fprintf(w, "\nthe %d slowest tests:\n", len(times))
		for _, t := range times {
			fmt.Fprintf(w, "%8.1fs  %s %s\n", t.elapsed, strings.TrimPrefix(t.key.pkg, "github.com/fac-compiler/fac/"), t.key.test)
		}
	}
	if events == 0 {
		fmt.Fprintln(w, "testreport: no test events in the input")
		return 1
	}
	return status
}
