package flash

import (
	"fmt"
	"math"
	"strconv"
	"strings"

	"github.com/fac-compiler/fac/compiler"
	"github.com/fac-compiler/fac/runtime/cpu"
	"github.com/fac-compiler/fac/stdlib/attention"
)

// Appending to a paged cache (docs/decoding.md#appending-to-the-cache): a
// paged call given k_new and v_new first runs kv_append, which writes them
// (and q) rotated into the cache at each sequence's length, then attends
// over the lengths grown by SeqQ, as FlashAttention's
// flash_attn_with_kvcache does with k, v and rotary tables.

// RotaryForm is the rotary embedding an appending paged call applies to q
// and the new keys.
type RotaryForm int

const (
	// RotaryNone rotates nothing.
	RotaryNone RotaryForm = iota
	// RotaryNeoX is GPT-NeoX's form (half-split): column i < R/2 pairs
	// with i + R/2 (R the rotary dim); FlashAttention's
	// rotary_interleaved=False.
	RotaryNeoX
	// RotaryGPTJ is GPT-J's form (interleaved): column 2i pairs with
	// 2i + 1; FlashAttention's rotary_interleaved=True.
	RotaryGPTJ
)

func (r RotaryForm) String() string {
	switch r {
	case RotaryNone:
		return "none"
	case RotaryNeoX:
		return "neox"
	case RotaryGPTJ:
		return "gptj"
	}
	return "RotaryForm(" + strconv.Itoa(int(r)) + ")"
}

// ParseRotaryForm reads "none" (or ""), "neox" (or "half") and "gptj" (or
// "interleaved"), in any case.
func ParseRotaryForm(s string) (RotaryForm, error) {
	switch strings.ToLower(s) {
	case "none", "":
		return RotaryNone, nil
	case "neox", "half":
		return RotaryNeoX, nil
	case "gptj", "interleaved":
		return RotaryGPTJ, nil
	}
	return 0, fmt.Errorf("rotary form %q: want neox (half-split pairs), gptj (interleaved pairs) or none", s)
}

// RotaryTables are RoPE's tables for PagedInputs.RotaryCos and RotarySin:
// [positions, rotaryDim/2], the angle of position p and pair i being
// p · base^(−2i/rotaryDim) (base 10000 in GPT-NeoX and Llama 2, 500000 in
// Llama 3), computed in float64.
func RotaryTables(positions, rotaryDim int, base float64) (cos, sin []float32) {
	w := rotaryDim / 2
	cos, sin = make([]float32, positions*w), make([]float32, positions*w)
	for p := range positions {
		for i := range w {
			theta := float64(p) * math.Pow(base, -float64(2*i)/float64(rotaryDim))
			cos[p*w+i], sin[p*w+i] = float32(math.Cos(theta)), float32(math.Sin(theta))
		}
	}
	return cos, sin
}

// appendCall is what a paged call appends: SeqQ rows a sequence, rotated
// in form rotary over the first rotaryDim columns by tables of positions
// rows (rotaryDim and positions 0 without rotary).
type appendCall struct {
	rotary               RotaryForm
	rotaryDim, positions int
}

// addLens adds the rotary embedding to a kernel problem's Lens.
func (a *appendCall) addLens(lens map[string]int) {
	lens[attention.AppendRotaryDim] = a.rotaryDim
	lens[attention.AppendRotaryRows] = a.positions
	lens[attention.AppendRotaryInterleaved] = 0
	if a.rotary == RotaryGPTJ {
		lens[attention.AppendRotaryInterleaved] = 1
	}
}

// checkRotary checks a rotary embedding of form r over rotaryDim columns
// (0: all of Dim) and returns the rotated columns: 0 for RotaryNone, which
// takes no dim.
func (f *Forward) checkRotary(r RotaryForm, rotaryDim int) (int, error) {
	switch {
	case r == RotaryNone && rotaryDim != 0:
		return 0, fmt.Errorf("rotary dim %d without a rotary form: set the form (neox or gptj)", rotaryDim)
	case r == RotaryNone:
		return 0, nil
	case r != RotaryNeoX && r != RotaryGPTJ:
		return 0, fmt.Errorf("rotary form %d: want RotaryNone, RotaryNeoX or RotaryGPTJ", int(r))
	case rotaryDim == 0:
		rotaryDim = f.dim
	}
	if rotaryDim < 2 || rotaryDim%2 != 0 || rotaryDim > f.dim {
		return 0, fmt.Errorf("rotary dim %d: want an even count of 2 to the head dim %d", rotaryDim, f.dim)
	}
	return rotaryDim, nil
}

// checkAppendHost checks the appended rows and rotary tables of host call
// in (ps with KVHeads set): nil when it appends nothing, which takes no
// rotary embedding either.
func (f *Forward) checkAppendHost(in PagedInputs, ps PagedShape) (*appendCall, error) {
	if in.KNew == nil && in.VNew == nil {
		if in.Rotary != RotaryNone || in.RotaryCos != nil || in.RotarySin != nil {
			return nil, fmt.Errorf("a rotary embedding without k_new and v_new: the call rotates what it appends (and q with it)")
		}
		return nil, nil
	}
	rows := ps.Batch * ps.SeqQ * ps.KVHeads
	if len(in.KNew) != rows*f.dim {
		return nil, fmt.Errorf("k_new has %d elements: want [%d, %d, %d, %d] (batch, seqlen_q, kv heads, dim)", len(in.KNew), ps.Batch, ps.SeqQ, ps.KVHeads, f.dim)
	}
	if len(in.VNew) != rows*f.dimV {
		return nil, fmt.Errorf("v_new has %d elements: want [%d, %d, %d, %d] (batch, seqlen_q, kv heads, dim v)", len(in.VNew), ps.Batch, ps.SeqQ, ps.KVHeads, f.dimV)
	}
	rd, err := f.checkRotary(in.Rotary, in.RotaryDim)
	if err != nil {
		return nil, err
	}
	a := &appendCall{rotary: in.Rotary, rotaryDim: rd}
	if rd == 0 {
		if in.RotaryCos != nil || in.RotarySin != nil {
			return nil, fmt.Errorf("rotary tables without a rotary form: set the form (neox or gptj)")
		}
		return a, nil
	}
	w := rd / 2
	if len(in.RotaryCos) == 0 || len(in.RotaryCos)%w != 0 {
		return nil, fmt.Errorf("rotary_cos has %d elements: want [positions, %d] (rotary dim %d / 2) with positions ≥ 1", len(in.RotaryCos), w, rd)
	}
	if len(in.RotarySin) != len(in.RotaryCos) {
		return nil, fmt.Errorf("rotary_sin has %d elements: want %d, as rotary_cos", len(in.RotarySin), len(in.RotaryCos))
	}
	a.positions = len(in.RotaryCos) / w
	return a, nil
}

// appendedLens are the lengths after appending n rows to sequences of
// lengths old in caches of capacity keys each (max_pages · page_size); old
// of another count than batch comes back as it is, for the geometry check
// to name.
func appendedLens(old []int32, batch, n, capacity int) ([]int32, error) {
	if len(old) != batch {
		return old, nil
	}
	lens := make([]int32, len(old))
	for b, l := range old {
		if l < 0 || int(l)+n > capacity {
			return nil, fmt.Errorf("cache_seqlens[%d] = %d: appending %d rows needs 0 ≤ length ≤ max_pages · page_size − %d = %d", b, l, n, n, capacity-n)
		}
		lens[b] = l + int32(n)
	}
	return lens, nil
}

// checkPositions checks that the rotary tables reach every appended row:
// the longest sequence's last position, lens being the lengths after the
// append.
func (a *appendCall) checkPositions(lens []int32) error {
	if a.rotaryDim == 0 {
		return nil
	}
	for b, n := range lens {
		if int(n) > a.positions {
			return fmt.Errorf("rotary tables have %d positions, but sequence %d's appended rows reach position %d", a.positions, b, n-1)
		}
	}
	return nil
}

// appendSlotsFree checks on the host that no appended row lands where a
// sequence keeps a key or where another appended row goes: appended rows
// need pages (or page rows) of their own, since a shared page would change
// the other sequence's keys (and two programs would race on one row).
// table is [B, maxPages], old and lens the lengths before and after.
func appendSlotsFree(table []int32, maxPages, pageSize, numPages int, old, lens []int32) error {
	// owner is 1 + the sequence that reads (or appends) each cache row.
	owner := make([]int32, numPages*pageSize)
	slot := func(b, j int) int {
		return int(table[b*maxPages+j/pageSize])*pageSize + j%pageSize
	}
	for b, n := range old {
		for j := range int(n) {
			owner[slot(b, j)] = int32(b) + 1
		}
	}
	for b, n := range lens {
		for j := int(old[b]); j < int(n); j++ {
			s := slot(b, j)
			if o := owner[s]; o != 0 {
				return fmt.Errorf("sequence %d appends position %d to row %d of page %d, which sequence %d already holds or appends to: appended rows need page rows of their own",
					b, j, s%pageSize, s/pageSize, o-1)
			}
			owner[s] = int32(b) + 1
		}
	}
	return nil
}

// appendKernel compiles (once) kv_append for f's dtype and head dims.
func (f *Forward) appendKernel() (*compiler.Result, error) {
	f.dmu.Lock()
	defer f.dmu.Unlock()
	if f.appendRes != nil {
		return f.appendRes, nil
	}
	consts := map[string]string{"HEAD_DIM": strconv.Itoa(f.dim), "DTYPE": f.dtype.String()}
	if f.dimV != f.dim {
		consts["HEAD_DIM_V"] = strconv.Itoa(f.dimV)
	}
	c := attention.KVAppend
	res, err := compileKernel(c, compiler.Request{Kernel: c.Kernel, Passes: f.opts.Passes, Target: f.opts.target(), Consts: consts})
	if err != nil {
		return nil, err
	}
	f.appendRes = res
	return res, nil
}

// PagedAppendReference is the cache an appending paged call leaves, in
// float64 and RunPagedCPU's layouts: KCache and VCache with each
// sequence's new rows written at its length (the keys rotated as
// in.Rotary says, then rounded to the DType the cache holds) and the
// lengths grown by SeqQ. in is the call's inputs as they were before it
// (RunPagedCPU updates them in place).
func (f *Forward) PagedAppendReference(in PagedInputs, ps PagedShape) (kCache, vCache []float64, lens []int32, err error) {
	c, err := f.checkPaged(in, ps)
	if err != nil {
		return nil, nil, nil, err
	}
	if c.app == nil {
		return nil, nil, nil, fmt.Errorf("PagedAppendReference: the call appends nothing (no k_new, v_new)")
	}
	kc, vc, _ := f.appendedRef(in, c)
	return kc, vc, c.lens, nil
}

// appendedRef is checked call c's caches after the append and its q as the
// attention reads it, rotated and rounded to the DType (RunPagedCPU's q
// workspace), in float64; without an append, the inputs rounded.
func (f *Forward) appendedRef(in PagedInputs, c pagedCall) (kc, vc, q []float64) {
	kc, vc, q = roundTo(in.KCache, f.dtype), roundTo(in.VCache, f.dtype), roundTo(in.Q, f.dtype)
	a := c.app
	if a == nil {
		return kc, vc, q
	}
	ps, d, dv := c.ps, f.dim, f.dimV
	cos, sin := roundTo(in.RotaryCos, f.dtype), roundTo(in.RotarySin, f.dtype)
	kn, vn := roundTo(in.KNew, f.dtype), roundTo(in.VNew, f.dtype)
	for b := range ps.Batch {
		old := int(in.CacheSeqlens[b])
		for s := range ps.SeqQ {
			pos := old + s
			for h := range ps.Heads {
				a.rotate(q[((b*ps.Heads+h)*ps.SeqQ+s)*d:][:d], pos, cos, sin)
			}
			pg := int(in.PageTable[b*c.maxPages+pos/ps.PageSize])
			at := (pg*ps.PageSize + pos%ps.PageSize) * ps.KVHeads
			for h := range ps.KVHeads {
				src := ((b*ps.SeqQ+s)*ps.KVHeads + h)
				k := kc[(at+h)*d:][:d]
				copy(k, kn[src*d:][:d])
				a.rotate(k, pos, cos, sin)
				copy(vc[(at+h)*dv:][:dv], vn[src*dv:][:dv])
			}
		}
	}
	cpu.Round(f.dtype, q)
	cpu.Round(f.dtype, kc)
	return kc, vc, q
}

// rotate rotates row x (one head's columns) in place at position pos, in
// float64, by the tables cos and sin ([positions, rotaryDim / 2]).
func (a *appendCall) rotate(x []float64, pos int, cos, sin []float64) {
	w := a.rotaryDim / 2
	if w == 0 {
		return
	}
	c, s := cos[pos*w:][:w], sin[pos*w:][:w]
	for i := range w {
		i0, i1 := i, i+w // GPT-NeoX: the halves
		if a.rotary == RotaryGPTJ {
			i0, i1 = 2*i, 2*i+1
		}
		x0, x1 := x[i0], x[i1]
		x[i0] = x0*c[i] - x1*s[i]
		x[i1] = x1*c[i] + x0*s[i]
	}
}
