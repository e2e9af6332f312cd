package flash

import (
	"context"
	"fmt"
	"math"

	"github.com/fac-compiler/fac/compiler"
	"github.com/fac-compiler/fac/lang"
	"github.com/fac-compiler/fac/launch"
	"github.com/fac-compiler/fac/reference"
	"github.com/fac-compiler/fac/stdlib/attention"
)

// ForwardVarlen is a compiled flash_fwd_varlen: attention over packed
// sequences of different lengths (FlashAttention's varlen API). Mods see
// positions within their sequence, b = the sequence index, and that
// sequence's seqlen_q and seqlen_k. It is block-sparse per sequence: each
// sequence has its own block mask (VarlenBlockMask), so empty blocks are
// skipped and the mask is evaluated on partial blocks only.
type ForwardVarlen struct {
	f        *Forward                // the kernel, with the varlen contract
	tunedFor perArch[*ForwardVarlen] // compiled with the tiles tuned for a GPU arch (tuned)
}

// VarlenInputs are a varlen call's tensors, contiguous row-major: Q is
// [total_q, Heads, Dim], K [total_k, KVHeads, Dim] and V [total_k, KVHeads,
// DimV] (DimV: Options.DimV, else Dim); sequence b is
// rows CuSeqlensQ[b] .. CuSeqlensQ[b+1] of Q (CuSeqlensK for K and V),
// both [num_seqs + 1], from 0, non-decreasing. Aux, Scalars and Scale are
// Inputs'; mods index aux tensors with positions within the sequence (aux
// tensors declared with seqlen_q or seqlen_k dimensions are refused at
// compile time). BlockMask, when set, is the call's block mask
// (ForwardVarlen.BlockMask for the same cu_seqlens, heads, mask and
// run-time parameters, reused across calls); nil builds one per call.
type VarlenInputs struct {
	Q, K, V                []float32
	CuSeqlensQ, CuSeqlensK []int32
	Aux                    map[string]any
	Scalars                map[string]any
	Scale                  float32
	BlockMask              *VarlenBlockMask
}

// CompileForwardVarlen compiles flash_fwd_varlen for head dimension dim
// (V's: opts.DimV, or dim). opts.Sinks is not supported yet. SPARSE_Q and SPARSE_K (opts.Consts,
// default 128) are the blocks of each sequence's block mask.
func CompileForwardVarlen(opts Options, dim int) (*ForwardVarlen, error) {
	ks, dimV, err := compileVariant(attention.ForwardVarlen, attention.VariantOptions{Sinks: opts.Sinks}, opts, dim)
	if err != nil {
		return nil, err
	}
	if err := checkVarlenAux(ks[0]); err != nil {
		return nil, err
	}
	res := ks[0].res
	f := &Forward{opts: opts, res: res, contract: ks[0].contract, dim: dim, dimV: dimV, dtype: res.Func().Params[0].Type.Elem}
	return &ForwardVarlen{f: f}, nil
}

// checkVarlenAux refuses an aux tensor shaped by seqlen_q or seqlen_k
// among the mods of varlen kernel st: it would be indexed with each
// sequence's lengths but sized by the host for one.
func checkVarlenAux(st stage) error {
	for _, m := range []*lang.ModInst{st.res.Mask, st.res.Score} {
		if m == nil {
			continue
		}
		for _, p := range m.AuxParams() {
			for _, d := range p.Dims {
				if d.SeqQ != 0 || d.SeqK != 0 {
					return fmt.Errorf("%s %s: aux tensor %s %s is shaped by the sequence lengths, which %s does not support yet (they differ per sequence)",
						m.Kind(), m, p.Name, p.Type(), st.contract.Kernel)
				}
			}
		}
	}
	return nil
}

// Result is the compiled kernel instance.
func (v *ForwardVarlen) Result() *compiler.Result { return v.f.res }

// AuxTensors and RuntimeParams are Forward's.
func (v *ForwardVarlen) AuxTensors() []string    { return v.f.AuxTensors() }
func (v *ForwardVarlen) RuntimeParams() []string { return v.f.RuntimeParams() }

// VarlenShape checks cu_seqlens against the packed lengths (totalQ and
// totalK tokens) and gives the problem's shape: Batch sequences, SeqQ and
// SeqK the longest (at least 1, which a shape needs). It allocates nothing, so
// callers check a call with it before they allocate its tensors: heads,
// kv heads and dim must be positive, and the packed tensors
// ([total, heads, dim]) and the padded problem ([num_seqs, heads,
// longest, dim]) addressable with 32-bit offsets. V's head dim is dim: a
// call with another (Options.DimV) sets the shape's DimV.
func VarlenShape(cuQ, cuK []int32, totalQ, totalK, heads, kvHeads, dim int) (Shape, error) {
	return varlenShape(cuQ, cuK, totalQ, totalK, heads, kvHeads, dim, dim)
}

// varlenShape is VarlenShape with V's head dim dimV.
func varlenShape(cuQ, cuK []int32, totalQ, totalK, heads, kvHeads, dim, dimV int) (Shape, error) {
	if len(cuQ) < 2 || len(cuQ) != len(cuK) {
		return Shape{}, fmt.Errorf("cu_seqlens_q and cu_seqlens_k must have the same length num_seqs + 1 ≥ 2, got %d and %d", len(cuQ), len(cuK))
	}
	if kvHeads == 0 {
		kvHeads = heads
	}
	for _, d := range []struct {
		name string
		v    int
	}{{"heads", heads}, {"kv heads", kvHeads}, {"head dim", dim}, {"value head dim", dimV}} {
		if d.v <= 0 {
			return Shape{}, fmt.Errorf("varlen: %s must be positive, got %d", d.name, d.v)
		}
	}
	longest := func(name string, cu []int32, total int) (int, error) {
		if cu[0] != 0 {
			return 0, fmt.Errorf("%s[0] = %d, want 0", name, cu[0])
		}
		m := 1
		for i := 1; i < len(cu); i++ {
			if cu[i] < cu[i-1] {
				return 0, fmt.Errorf("%s decreases at %d (%d after %d)", name, i, cu[i], cu[i-1])
			}
			m = max(m, int(cu[i]-cu[i-1]))
		}
		if last := int(cu[len(cu)-1]); last != total {
			return 0, fmt.Errorf("%s ends at %d, but there are %d tokens", name, last, total)
		}
		return m, nil
	}
	sq, err := longest("cu_seqlens_q", cuQ, totalQ)
	if err != nil {
		return Shape{}, err
	}
	sk, err := longest("cu_seqlens_k", cuK, totalK)
	if err != nil {
		return Shape{}, err
	}
	for _, t := range []struct {
		name              string
		total, heads, dim int
	}{{"q", totalQ, heads, dim}, {"k", totalK, kvHeads, dim}, {"v", totalK, kvHeads, dimV}, {"o", totalQ, heads, dimV}} {
		if n, ok := launch.Product(t.total, t.heads, t.dim); !ok || n > math.MaxInt32 {
			return Shape{}, fmt.Errorf("varlen: %s has %d×%d×%d elements (total tokens × heads × head dim), more than 32-bit offsets address", t.name, t.total, t.heads, t.dim)
		}
	}
	sh := Shape{Batch: len(cuQ) - 1, Heads: heads, KVHeads: kvHeads, SeqQ: sq, SeqK: sk, Dim: dim}
	if dimV != dim {
		sh.DimV = dimV
	}
	return sh, sh.Validate()
}

// RunCPU runs the kernel on the CPU reference device and returns O
// ([total_q, Heads, DimV]) and LSE ([Heads, total_q], natural log). A row
// that keeps no key (an empty k sequence, or the mask) gets O = 0 and
// LSE = -inf.
func (v *ForwardVarlen) RunCPU(in VarlenInputs, heads, kvHeads int) (o, lse []float32, err error) {
	return v.RunCPUContext(context.Background(), in, heads, kvHeads)
}

// RunCPUContext is RunCPU that gives up once ctx is done.
func (v *ForwardVarlen) RunCPUContext(ctx context.Context, in VarlenInputs, heads, kvHeads int) (o, lse []float32, err error) {
	calls, host, err := v.bind(in, heads, kvHeads)
	if err != nil {
		return nil, nil, err
	}
	out, err := runCPU(ctx, v.f.kernels(), calls, host)
	if err != nil {
		return nil, nil, err
	}
	return f32s(out, "o"), f32s(out, "lse"), nil
}

// bind checks a call's inputs, gets its block mask (given or built) and
// binds the kernel; host are its input data by parameter name.
func (v *ForwardVarlen) bind(in VarlenInputs, heads, kvHeads int) ([]*launch.Call, map[string]any, error) {
	f := v.f
	sh, totalQ, totalK, err := f.varlenCall(in, heads, kvHeads)
	if err != nil {
		return nil, nil, err
	}
	if err := f.checkMods(in.Aux, in.Scalars, sh); err != nil {
		return nil, nil, err
	}
	aux, err := auxLens(in.Aux)
	if err != nil {
		return nil, nil, err
	}
	bm, err := v.varlenBlockMask(in, heads)
	if err != nil {
		return nil, nil, err
	}
	host := map[string]any{"q": in.Q, "k": in.K, "v": in.V, "cu_seqlens_q": in.CuSeqlensQ, "cu_seqlens_k": in.CuSeqlensK}
	lens := map[string]int{}
	bm.addLists(attention.ForwardVarlen.Lists, host, lens)
	p := launch.Problem{Shape: sh, Scale: in.Scale, TotalQ: totalQ, TotalK: totalK, Lens: lens}
	ks := f.kernels()
	calls, err := bindAll(ks, 0, launch.Request{Problem: p, Aux: aux, Scalars: in.Scalars}, nil)
	if err != nil {
		return nil, nil, err
	}
	addCallData(ks, calls, host, nil, in.Aux, nil)
	return calls, host, nil
}

// Reference computes naive float64 attention sequence by sequence with the
// same mods (evaluated on the CPU device with each sequence's lengths and
// b = its index), in RunCPU's layouts, for checking any device's output.
func (v *ForwardVarlen) Reference(in VarlenInputs, heads, kvHeads int) (o, lse []float64, err error) {
	f := v.f
	sh, totalQ, _, err := f.varlenCall(in, heads, kvHeads)
	if err != nil {
		return nil, nil, err
	}
	d, dv, hkv := f.dim, f.dimV, sh.KV()
	vals := Inputs{Aux: in.Aux, Scalars: in.Scalars}.modValues()
	scale := float64(f.problem(sh, in.Scale).SoftmaxScale())
	// The reference sees the inputs at the kernel's storage precision.
	q, k, vv := roundTo(in.Q, f.dtype), roundTo(in.K, f.dtype), roundTo(in.V, f.dtype)
	o, lse = make([]float64, totalQ*heads*dv), make([]float64, heads*totalQ)
	var evalErr firstError
	for b := 0; b < sh.Batch; b++ {
		qs, ks := int(in.CuSeqlensQ[b]), int(in.CuSeqlensK[b])
		sq, sk := int(in.CuSeqlensQ[b+1])-qs, int(in.CuSeqlensK[b+1])-ks
		if sq == 0 {
			continue
		}
		// The mods see this sequence's lengths; they are compiled for
		// positive ones, and with no keys no mod is called.
		seq := Shape{Batch: sh.Batch, Heads: heads, KVHeads: hkv, SeqQ: sq, SeqK: max(sk, 1), Dim: d, DimV: sh.DimV}
		mask, score, err := f.refModsFor(seq, vals, b, &evalErr)
		if err != nil {
			return nil, nil, err
		}
		so, slse := reference.Attention(gatherSeq(q, qs, sq, heads, d), gatherSeq(k, ks, sk, hkv, d), gatherSeq(vv, ks, sk, hkv, dv),
			reference.Shape{B: 1, H: heads, HKV: hkv, Sq: sq, Sk: sk, D: d, DV: dv}, scale, mask, score)
		for h := 0; h < heads; h++ {
			for t := 0; t < sq; t++ {
				lse[h*totalQ+qs+t] = slse[h*sq+t]
				copy(o[((qs+t)*heads+h)*dv:][:dv], so[(h*sq+t)*dv:][:dv])
			}
		}
	}
	return o, lse, evalErr.get()
}

// varlenCall checks a varlen call's packed tensors and cu_seqlens (kvHeads
// 0: heads) and gives its shape (varlenShape) and packed token counts.
func (f *Forward) varlenCall(in VarlenInputs, heads, kvHeads int) (sh Shape, totalQ, totalK int, err error) {
	if kvHeads == 0 {
		kvHeads = heads
	}
	if heads <= 0 || kvHeads <= 0 {
		return sh, 0, 0, fmt.Errorf("heads %d and kv heads %d must be positive", heads, kvHeads)
	}
	if totalQ, totalK, err = f.varlenTotals(in.Q, in.K, in.V, heads, kvHeads); err != nil {
		return sh, 0, 0, err
	}
	sh, err = varlenShape(in.CuSeqlensQ, in.CuSeqlensK, totalQ, totalK, heads, kvHeads, f.dim, f.dimV)
	return sh, totalQ, totalK, err
}

// gatherSeq is a sequence's rows of packed xs ([total, hs, d]), the n
// from start, as [1, hs, n, d].
func gatherSeq(xs []float64, start, n, hs, d int) []float64 {
	out := make([]float64, hs*n*d)
	for t := range n {
		for h := range hs {
			copy(out[(h*n+t)*d:][:d], xs[((start+t)*hs+h)*d:][:d])
		}
	}
	return out
}

// varlenTotals are the packed token counts of a varlen call's tensors: q
// [total_q, heads, Dim], k [total_k, kvHeads, Dim] and v [total_k, kvHeads,
// DimV].
func (f *Forward) varlenTotals(q, k, v []float32, heads, kvHeads int) (totalQ, totalK int, err error) {
	d, dv := f.dim, f.dimV
	if len(q)%(heads*d) != 0 || len(k)%(kvHeads*d) != 0 || len(v) != len(k)/d*dv {
		return 0, 0, fmt.Errorf("q has %d elements, k %d, v %d: want [total_q, %d, %d], [total_k, %d, %d] and [total_k, %d, %d]",
			len(q), len(k), len(v), heads, d, kvHeads, d, kvHeads, dv)
	}
	return len(q) / (heads * d), len(k) / (kvHeads * d), nil
}
