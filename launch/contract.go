package launch

import (
	"fmt"
	"math"
	"slices"
	"strings"

	"github.com/fac-compiler/fac/artifact"
	"github.com/fac-compiler/fac/tir"
)

// Problem is what a launch is for: the shape, the kernel's integer
// attributes (its compile-time arguments such as BLOCK_M) and the call's
// runtime knobs.
type Problem struct {
	Shape Shape
	Attrs map[string]int64
	Scale float32 // softmax scale; 0 means 1/sqrt(Dim)
	// TotalQ and TotalK are the packed token counts of a varlen problem
	// (Shape.Batch sequences, SeqQ and SeqK the longest); 0 otherwise.
	TotalQ, TotalK int
	// Lens are the lengths of 1-D tensors sized by their data, not by the
	// shape (a varlen kernel's per-sequence block-mask lists), by tensor
	// name; contracts read them in Dims.
	Lens map[string]int
	// NumSplits is the number of split-KV programs per q tile of a
	// split-KV kernel (flash_fwd_splitkv) and its combine; 0 means 1.
	NumSplits int
	// Pack is the number of query heads packed into one tile's rows
	// (PackGQA: the heads sharing a kv head); 0 means 1.
	Pack int
}

// Splits is NumSplits, at least 1.
func (p Problem) Splits() int { return max(p.NumSplits, 1) }

// PackHeads is Pack, at least 1.
func (p Problem) PackHeads() int { return max(p.Pack, 1) }

// Attr is an integer attribute of the kernel; a contract only asks for
// attributes its .fa declares, which the contract test checks.
func (p Problem) Attr(name string) int {
	v, ok := p.Attrs[name]
	if !ok {
		panic(fmt.Sprintf("launch: kernel attribute %s missing (contract and kernel disagree)", name))
	}
	return int(v)
}

// SoftmaxScale is Scale, or 1/sqrt(Dim) when Scale is 0.
func (p Problem) SoftmaxScale() float32 {
	if p.Scale != 0 {
		return p.Scale
	}
	return float32(1 / math.Sqrt(float64(p.Shape.Dim)))
}

// Contract is a kernel's launch contract, declared once beside its .fa file.
type Contract struct {
	Kernel string // the kernel's name in its .fa file
	File   string // the .fa file, relative to the stdlib folder

	// Tensors are the kernel's pointer parameters that the caller provides
	// (inputs) or receives (outputs), with their shapes.
	Tensors []Tensor
	// Scalars are parameters computed from the problem.
	Scalars []Scalar
	// BlockMask names the block-mask parameters the kernel reads; nil when
	// it takes no block mask.
	BlockMask *BlockMaskParams
	// Mods are the kernel's mod parameters (mask, score): each aux tensor a
	// mod reads arrives as parameters "<mod>.<aux>" (a pointer) and
	// "<mod>.<aux>.len" (its length in elements), each run-time parameter
	// as "<mod>.<name>" (a scalar), and batch and num_heads, when a mod
	// reads them, as "batch" and "num_heads" (see Sizes).
	Mods []string
	// Grid is the logical grid for a problem: the range of the kernel's
	// program ids, one program per tile. A persistent kernel (one taking
	// tir.GridParams) is launched on fewer programs that loop over it
	// (Call.Tiles, Call.Persist).
	Grid func(p Problem) [3]int
	// Check, when set, rejects problems the kernel cannot run.
	Check func(p Problem) error
	// TileCosts, when set, estimates the time of each tile of the logical
	// grid (linearized x fastest) from the request's host block mask: a
	// persistent kernel's launch deals its tiles to programs from them
	// (Call.Persist). Nil, or a nil result: every tile alike.
	TileCosts func(p Problem, bm BlockMask, tiles [3]int) []float64
	// Tuned are measured sets of compile-time arguments the kernel runs
	// faster with, in order of preference, each with the requests it is
	// for (TunedSet.When: code generation variant, DTYPE, HEAD_DIM, mods);
	// the compiler applies the first that the request leaves whole
	// (TunedFor) when the request names the arch.
	Tuned []TunedSet
	// TunedAlone are the Tuned arguments a request may set to other values
	// on its own (the pipeline's depth): the rest of the set still applies.
	TunedAlone []string
}

// Tensor is a pointer parameter with the shape it points to. Strides names
// the integer parameters that carry the strides (in elements) of all but the
// last dimension, which is contiguous; a nil Strides means fully contiguous.
type Tensor struct {
	Name    string
	Output  bool
	Dims    func(p Problem) []int
	Strides []string
	// Zeroed marks an input of counters (last_arrival's) that the caller
	// provides zeroed and the kernel leaves zeroed: one buffer, zeroed
	// when it is allocated, serves every launch.
	Zeroed bool
}

// Scalar is a parameter computed from the problem: an int (passed as i32 or
// i64 by the parameter's type) or a float32.
type Scalar struct {
	Name  string
	Value func(p Problem) any
}

// BlockMaskParams names a kernel's block-mask parameters: FlexAttention's
// four tensors of one direction, the strides of its count tensor over batch
// and head (0 where the mask is shared), and the length of an index row
// (RowLen: the row stride of the index tensors, BlockMask.RowLens, which
// may be less than the number of blocks).
type BlockMaskParams struct {
	Transposed                               bool // the q_* lists (for kernels walking kv blocks), else kv_*
	Counts, Indices, FullCounts, FullIndices string
	StrideB, StrideH, RowLen                 string
	BlockQAttr, BlockKAttr                   string // kernel attributes holding the mask's block sizes
}

// KVBlockMask is the usual set: kv_num_blocks, kv_indices,
// full_kv_num_blocks, full_kv_indices, bm_stride_b, bm_stride_h,
// num_kv_blocks, with block sizes SPARSE_Q × SPARSE_K.
var KVBlockMask = &BlockMaskParams{
	Counts: "kv_num_blocks", Indices: "kv_indices", FullCounts: "full_kv_num_blocks", FullIndices: "full_kv_indices",
	StrideB: "bm_stride_b", StrideH: "bm_stride_h", RowLen: "num_kv_blocks",
	BlockQAttr: "SPARSE_Q", BlockKAttr: "SPARSE_K",
}

func (c *Contract) tensor(name string) *Tensor {
	for i := range c.Tensors {
		if c.Tensors[i].Name == name {
			return &c.Tensors[i]
		}
	}
	return nil
}

func (c *Contract) scalar(name string) *Scalar {
	for i := range c.Scalars {
		if c.Scalars[i].Name == name {
			return &c.Scalars[i]
		}
	}
	return nil
}

func (c *Contract) isMod(name string) bool {
	for _, m := range c.Mods {
		if m == name {
			return true
		}
	}
	return false
}

// Outputs are the names of the output tensors.
func (c *Contract) Outputs() []string {
	var out []string
	for _, t := range c.Tensors {
		if t.Output {
			out = append(out, t.Name)
		}
	}
	return out
}

// auxParam splits a kernel parameter "mask.doc", "mask.doc.len" or
// "mask.offset" into its mod, aux (or run-time parameter) name and whether
// it is an aux tensor's length. A pointer is an aux tensor; a scalar
// without ".len" a run-time parameter.
func (c *Contract) auxParam(param string) (mod, aux string, isLen, ok bool) {
	mod, rest, found := strings.Cut(param, ".")
	if !found || !c.isMod(mod) {
		return "", "", false, false
	}
	if a, found := strings.CutSuffix(rest, ".len"); found {
		return mod, a, true, true
	}
	return mod, rest, false, true
}

// CheckParams checks the contract against a kernel's parameters (from its
// .fa signature after lowering, or from an artifact): every parameter is
// covered by exactly one role of the contract with a matching kind, and
// everything the contract names exists. Tensor maps, which codegen adds,
// are covered by the tensor and parameters they are built from, and a
// persistent kernel's grid parameters (tir.GridParams, all four, i32) by
// the launch, which binds them. It is what a launch and the contract tests
// call.
func (c *Contract) CheckParams(params []artifact.Param) error {
	have := map[string]artifact.Param{}
	for _, p := range params {
		have[p.Name] = p
	}
	want := func(name, kind string) error {
		p, ok := have[name]
		switch {
		case !ok:
			return fmt.Errorf("kernel %s has no parameter %s that its contract names", c.Kernel, name)
		case kind == "ptr" && p.Kind != artifact.KindPtr:
			return fmt.Errorf("kernel %s: parameter %s is %s, its contract says a tensor (pointer)", c.Kernel, name, p.Kind)
		case kind == "scalar" && p.Kind == artifact.KindPtr:
			return fmt.Errorf("kernel %s: parameter %s is a pointer, its contract says a scalar", c.Kernel, name)
		case p.Kind == artifact.KindTensorMap:
			return fmt.Errorf("kernel %s: parameter %s is a tensor map, which contracts do not name", c.Kernel, name)
		}
		return nil
	}
	used := map[string]bool{}
	use := func(name, kind string) error {
		if used[name] {
			return fmt.Errorf("contract of kernel %s names parameter %s twice", c.Kernel, name)
		}
		used[name] = true
		return want(name, kind)
	}
	for _, t := range c.Tensors {
		if err := use(t.Name, "ptr"); err != nil {
			return err
		}
		if t.Zeroed && (t.Output || have[t.Name].Elem != "i32") {
			return fmt.Errorf("kernel %s: zeroed tensor %s must be an i32 input, not %s", c.Kernel, t.Name, have[t.Name].Elem)
		}
		for _, s := range t.Strides {
			if err := use(s, "scalar"); err != nil {
				return err
			}
		}
	}
	for _, s := range c.Scalars {
		if err := use(s.Name, "scalar"); err != nil {
			return err
		}
	}
	if err := c.checkGridParams(params, used); err != nil {
		return err
	}
	if bm := c.BlockMask; bm != nil {
		for _, n := range []string{bm.Counts, bm.Indices, bm.FullCounts, bm.FullIndices} {
			if err := use(n, "ptr"); err != nil {
				return err
			}
		}
		for _, n := range []string{bm.StrideB, bm.StrideH, bm.RowLen} {
			if err := use(n, "scalar"); err != nil {
				return err
			}
		}
	}
	for _, p := range params {
		if used[p.Name] {
			continue
		}
		if p.Kind == artifact.KindTensorMap {
			// Codegen adds these; the launch builds them from parameters
			// the contract names.
			if err := c.checkTMA(p, have); err != nil {
				return err
			}
			continue
		}
		if _, _, isLen, ok := c.auxParam(p.Name); ok {
			if isLen && p.Kind == artifact.KindPtr {
				return fmt.Errorf("kernel %s: aux parameter %s has kind %s", c.Kernel, p.Name, p.Kind)
			}
			continue
		}
		if isGridParam(p.Name) {
			continue // checked by checkGridParams
		}
		if c.isSize(p.Name) {
			if p.Kind != artifact.KindI32 {
				return fmt.Errorf("kernel %s: parameter %s has kind %s, want i32", c.Kernel, p.Name, p.Kind)
			}
			continue
		}
		return fmt.Errorf("kernel %s: parameter %s is not in its launch contract", c.Kernel, p.Name)
	}
	return nil
}

// isGridParam reports whether param is one of a persistent kernel's grid
// parameters (tir.GridParams).
func isGridParam(param string) bool {
	return slices.Contains(tir.GridParams, param) || param == tir.GridOrder
}

// checkGridParams checks a persistent kernel's grid parameters: all of
// tir.GridParams or none, each i32, and none named by the contract (the
// launch binds them; used holds the names the contract's roles took).
func (c *Contract) checkGridParams(params []artifact.Param, used map[string]bool) error {
	for _, name := range append(slices.Clone(tir.GridParams), tir.GridOrder) {
		if used[name] {
			return fmt.Errorf("contract of kernel %s names parameter %s, which a persistent kernel's launch binds", c.Kernel, name)
		}
	}
	seen := map[string]bool{}
	for _, p := range params {
		if !isGridParam(p.Name) {
			continue
		}
		if seen[p.Name] {
			return fmt.Errorf("kernel %s has grid parameter %s twice", c.Kernel, p.Name)
		}
		seen[p.Name] = true
		if p.Name == tir.GridOrder {
			if p.Kind != artifact.KindPtr || p.Elem != "i32" {
				return fmt.Errorf("kernel %s: grid parameter %s is %s (element %s), want ptr<i32>", c.Kernel, p.Name, p.Kind, p.Elem)
			}
			continue
		}
		if p.Kind != artifact.KindI32 || p.Elem == "i1" {
			return fmt.Errorf("kernel %s: grid parameter %s is %s (element %s), want i32", c.Kernel, p.Name, p.Kind, p.Elem)
		}
	}
	// grid.order is optional: kernels built before it (in bundles) take
	// the four scalars alone and compute the order themselves.
	n := len(seen)
	if seen[tir.GridOrder] {
		n--
	}
	if (n != 0 || seen[tir.GridOrder]) && n != len(tir.GridParams) {
		return fmt.Errorf("kernel %s has %d of the grid parameters %s: a persistent kernel takes all of them", c.Kernel, n, strings.Join(tir.GridParams, ", "))
	}
	return nil
}

// checkTMA checks that tensor-map parameter p can be built at launch: it
// maps a contract tensor, and its strides and bounds are i32 parameters; a
// dimension without a bound is the tensor's dimension of that stride.
func (c *Contract) checkTMA(p artifact.Param, have map[string]artifact.Param) error {
	tm := p.TMA
	if tm == nil || len(tm.Dims) == 0 {
		return fmt.Errorf("kernel %s: tensor-map parameter %s has no dimensions to map", c.Kernel, p.Name)
	}
	t := c.tensor(tm.Tensor)
	if t == nil || have[tm.Tensor].Kind != artifact.KindPtr {
		return fmt.Errorf("kernel %s: tensor-map parameter %s maps %q, which is not a tensor of its contract", c.Kernel, p.Name, tm.Tensor)
	}
	for i, d := range tm.Dims[1:] {
		if have[d.Stride].Kind != artifact.KindI32 || (d.Bound != "" && have[d.Bound].Kind != artifact.KindI32) {
			return fmt.Errorf("kernel %s: tensor-map parameter %s: dim %d's stride %q and bound %q are not i32 parameters", c.Kernel, p.Name, i+1, d.Stride, d.Bound)
		}
		if d.Bound == "" && !slices.Contains(t.Strides, d.Stride) {
			return fmt.Errorf("kernel %s: tensor-map parameter %s: dim %d has no bound and %q is not a stride of tensor %s", c.Kernel, p.Name, i+1, d.Stride, t.Name)
		}
	}
	return nil
}

// Extent is the number of elements tensor name spans for problem p with the
// given leading-dimension strides (nil: contiguous).
func (c *Contract) Extent(name string, p Problem, strides []int) (int, error) {
	t := c.tensor(name)
	if t == nil {
		return 0, fmt.Errorf("kernel %s has no tensor %s", c.Kernel, name)
	}
	return extent(name, t.Dims(p), strides)
}
