package main

import (
	"strings"
	"testing"
)

func TestReport(t *testing.T) {
	in := strings.Join([]string{
		`{"Action":"run","Package":"p","Test":"TestA"}`,
		`{"Action":"output","Package":"p","Test":"TestA","Output":"a ok\n"}`,
		`{"Action":"pass","Package":"p","Test":"TestA","Elapsed":1.5}`,
		`{"Action":"output","Package":"p","Test":"TestB","Output":"b broke\n"}`,
		`{"Action":"fail","Package":"p","Test":"TestB","Elapsed":3}`,
		`{"Action":"pass","Package":"p","Test":"TestB/sub","Elapsed":9}`,
		`{"Action":"fail","Package":"p","Elapsed":4.5}`,
		`{"Action":"pass","Package":"q","Elapsed":0.2}`,
		`# a build error line`,
	}, "\n")
	var out strings.Builder
	if got := report(strings.NewReader(in), &out, 10); got != 1 {
		t.Fatalf("status %d, want 1", got)
	}
	s := out.String()
	for _, want := range []string{"--- FAIL: p TestB\nb broke\n", "FAIL\tp\t4.5s", "ok  \tq\t0.2s", "# a build error line", "1.5s  p TestA"} {
		if !strings.Contains(s, want) {
			t.Errorf("report lacks %q:\n%s", want, s)
		}
	}
	if strings.Contains(s, "a ok") || strings.Contains(s, "TestB/sub") {
		t.Errorf("report shows a passing test's output or a subtest's time:\n%s", s)
	}
	out.Reset()
	if got := report(strings.NewReader(""), &out, 10); got != 1 {
		t.Fatalf("empty input: status %d, want 1", got)
	}
}
