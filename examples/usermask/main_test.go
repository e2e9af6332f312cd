package main

import (
	"bytes"
	"math"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/fac-compiler/fac"
	"github.com/fac-compiler/fac/reference"
)

// TestUserMask runs the example (issue 46 item 19: the README and docs
// showed no way to pass a user's own source through the Go API) and checks
// that the kernel compiled from userSource applies the mods as they read:
// against naive attention whose mask and score are written again in Go.
func TestUserMask(t *testing.T) {
	var out bytes.Buffer
	rel, err := run(&out)
	if err != nil {
		t.Fatal(err)
	}
	if rel > 1e-5 || !strings.Contains(out.String(), "mask strided_local(64, 2), score temperature(2.0) on the CPU device") {
		t.Fatalf("relative error %g:\n%s", rel, out.String())
	}

	sh := fac.Shape{Batch: 2, Heads: 2, SeqQ: 150, SeqK: 170, Dim: 16}
	fwd, err := fac.CompileForward(fac.Options{Sources: map[string]string{"usermask.fa": userSource}, Mask: Mask, Score: Score}, sh.Dim)
	if err != nil {
		t.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(3, 4))
	randn := func(n int) []float32 {
		x := make([]float32, n)
		for i := range x {
			x[i] = float32(rng.NormFloat64())
		}
		return x
	}
	n := sh.Batch * sh.Heads * sh.SeqQ * sh.Dim
	nk := sh.Batch * sh.Heads * sh.SeqK * sh.Dim
	in := fac.Inputs{Q: randn(n), K: randn(nk), V: randn(nk)}
	o, lse, err := fwd.RunCPU(in, sh)
	if err != nil {
		t.Fatal(err)
	}
	to64 := func(xs []float32) []float64 {
		out := make([]float64, len(xs))
		for i, x := range xs {
			out[i] = float64(x)
		}
		return out
	}
	mask := func(b, h, i, j int) bool { d := i - j; return d >= 0 && d < 64 && d%2 == 0 }
	score := func(s float64, b, h, i, j int) float64 { return s / 2 }
	scale := float64(float32(1 / math.Sqrt(float64(sh.Dim))))
	ro, rlse := reference.Attention(to64(in.Q), to64(in.K), to64(in.V),
		reference.Shape{B: sh.Batch, H: sh.Heads, HKV: sh.Heads, Sq: sh.SeqQ, Sk: sh.SeqK, D: sh.Dim}, scale, mask, score)
	for i := range ro {
		if math.Abs(float64(o[i])-ro[i]) > 1e-4 {
			t.Fatalf("O[%d] = %v, the Go-written mods' %v", i, o[i], ro[i])
		}
	}
	for i := range rlse {
		if math.Abs(float64(lse[i])-rlse[i]) > 1e-4 {
			t.Fatalf("LSE[%d] = %v, the Go-written mods' %v", i, lse[i], rlse[i])
		}
	}
}
