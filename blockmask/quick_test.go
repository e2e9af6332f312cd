package blockmask

import (
	"testing"
	"time"
)

func TestQuick(t *testing.T) {
	p := loadProg(t, nil)
	for _, m := range []string{"none", "causal", "causal_bottom_right", "sliding_window(40, 3)", "prefix_lm(50)", "chunked(33)"} {
		mi := resolve(t, p, m)
		sh := Shape{B: 2, H: 3, SeqQ: 300, SeqK: 270}
		opts := Options{BlockQ: 32, BlockK: 16}
		t0 := time.Now()
		a, err := Analytic(p, mi, sh, opts)
		if err != nil {
			t.Fatal(err)
		}
		t1 := time.Now()
		c, err := EvaluateCPU(p, mi, sh, opts, nil)
		if err != nil {
			t.Fatal(err)
		}
		t2 := time.Now()
		b, err := BruteForce(p, mi, sh, opts, nil)
		if err != nil {
			t.Fatal(err)
		}
		t3 := time.Now()
		t.Logf("%s: analytic %v cpu %v brute %v density %.3f", m, t1.Sub(t0), t2.Sub(t1), t3.Sub(t2), a.Density())
		if !a.Equal(b) {
			t.Errorf("%s: analytic vs brute: %s", m, Diff(a, b))
		}
		if !c.Equal(b) {
			t.Errorf("%s: cpu vs brute: %s", m, Diff(c, b))
		}
		if err := a.Validate(); err != nil {
			t.Error(err)
		}
	}
}
