package flash

import (
	"context"
	"testing"
	"time"

	"github.com/fac-compiler/fac/blockmask"
)

// TestCreateBlockMask builds block masks with no kernel compiled: an
// analytic one at a long context and an evaluated one reading an aux
// tensor; both agree with the kernel's own builder.
func TestCreateBlockMask(t *testing.T) {
	ctx := context.Background()
	start := time.Now()
	bm, method, err := CreateBlockMask(ctx, BlockMaskOptions{Mask: "sliding_window(1023, 0)", Heads: 32, SeqQ: 1 << 17, SeqK: 1 << 17})
	if err != nil {
		t.Fatal(err)
	}
	if method != blockmask.MethodAnalytic || bm.NumQ != 1024 || bm.H != 1 {
		t.Errorf("method %v, %d q blocks, H %d", method, bm.NumQ, bm.H)
	}
	t.Logf("sliding window at S=131072: %v", time.Since(start))

	doc := make([]int32, 300)
	for i := range doc {
		doc[i] = int32(i / 70)
	}
	sh := Shape{Batch: 1, Heads: 1, SeqQ: 300, SeqK: 300, Dim: 16}
	got, method, err := CreateBlockMask(ctx, BlockMaskOptions{Mask: "document", SeqQ: 300, SeqK: 300, BlockQ: 64, BlockK: 64, Aux: map[string]any{"doc": doc}})
	if err != nil {
		t.Fatal(err)
	}
	fwd, err := CompileForward(Options{Mask: "document", Consts: map[string]string{"SPARSE_Q": "64", "SPARSE_K": "64"}}, 16)
	if err != nil {
		t.Fatal(err)
	}
	want, _, err := fwd.BuildBlockMask(sh, map[string]any{"doc": doc})
	if err != nil {
		t.Fatal(err)
	}
	if method != blockmask.MethodEvaluatedCPU || !got.Equal(want) {
		t.Errorf("document: method %v, equal to the kernel's %v", method, got.Equal(want))
	}

	cancelled, cancel := context.WithCancel(ctx)
	cancel()
	if _, _, err := CreateBlockMask(cancelled, BlockMaskOptions{Mask: "causal", SeqQ: 8, SeqK: 8}); err != context.Canceled {
		t.Errorf("cancelled: %v", err)
	}
	if _, _, err := CreateBlockMask(ctx, BlockMaskOptions{Mask: "no_such_mask", SeqQ: 8, SeqK: 8}); err == nil {
		t.Error("unknown mask accepted")
	}
}
