package launch

import (
	"fmt"
	"maps"
	"math"
	"slices"
	"strings"

	"github.com/fac-compiler/fac/artifact"
	"github.com/fac-compiler/fac/tir"
)

// BlockMask is what a launch reads of a block mask (*blockmask.BlockMask
// has these methods).
type BlockMask interface {
	Lists(transposed bool) (counts, indices, fullCounts, fullIndices []int32)
	Dims() (b, h, numQ, numK int)
	// RowLens are the lengths of an index row of the kv and of the q
	// lists (at most numK and numQ: a row needs only hold its longest list).
	RowLens() (kv, q int)
}

// Request is a call's named values, device-independent: the problem, the
// strides of tensors that are not contiguous, the block mask, the lengths
// (in elements) of the aux tensors the caller provides and the values of
// the mods' run-time parameters, by the names the caller used ("doc" or
// "mask.doc", "offset" or "mask.offset").
type Request struct {
	Problem   Problem
	Strides   map[string][]int // tensor → strides of its leading dimensions
	BlockMask BlockMask
	Aux       map[string]int
	Scalars   map[string]any // int, int32, int64, float32, float64 or bool
}

// Role says where a buffer's contents come from.
type Role int

const (
	Input           Role = iota // a contract tensor the caller provides
	Output                      // a contract tensor the kernel writes
	BlockMaskTensor             // one of the block mask's lists
	Aux                         // an aux tensor of a mod
)

// Buffer is one memory argument of a call.
type Buffer struct {
	Name string // the kernel parameter ("q", "kv_indices", "mask.doc")
	Role Role
	Elem string // element type, from the kernel's parameter
	Len  int    // elements the kernel may touch (from the shape and strides)
	Key  string // Aux: the caller's name for it
	// Zeroed: an input the caller provides zeroed, which the kernel leaves
	// zeroed (Tensor.Zeroed).
	Zeroed bool
}

// Arg is one argument in parameter order: a buffer, a scalar or a tensor
// map.
type Arg struct {
	Param  artifact.Param
	Buffer int // index into Call.Buffers, -1 for a scalar or a tensor map
	Value  any // scalars: int32, int64 or float32; tensor maps: TensorMap
}

// TensorMap is a tensor-map argument resolved for one call: the runtime
// encodes it (cuTensorMapEncodeTiled) with the device address of Buffer.
type TensorMap struct {
	Buffer  int      // index into Call.Buffers of the mapped tensor
	Elem    string   // bf16, f16
	Dims    []uint64 // extents, innermost first (each >= 1: an empty extent is raised to 1)
	Strides []uint64 // byte strides of dims 1.. (len(Dims)-1)
	Box     []uint32
	Swizzle int // bytes
}

// Call is a bound launch: grid, the buffers to provide and the arguments.
type Call struct {
	Kernel string
	// Grid is the grid to launch: Tiles, or for a persistent kernel
	// [programs, 1, 1] (Persist). A grid with a 0 is an empty launch,
	// which runtimes skip.
	Grid [3]int
	// Tiles is the logical grid, the contract's (set by Bind): the range
	// of the kernel's program ids, one tile each. It is Grid unless the
	// kernel is persistent.
	Tiles   [3]int
	Buffers []Buffer
	Args    []Arg
	// Order is a persistent kernel's tile order (its grid.order argument,
	// tir.GridOrder): slot s runs tile Order[s], program p the slots p,
	// p + programs, … Persist sets it; runtimes provide it as a buffer.
	Order []int32

	// What WithTensorMaps resolves tensor maps under.
	contract *Contract
	problem  Problem
	// costs are the tiles' expected times (Contract.TileCosts), nil when
	// not known: Persist deals tiles from them.
	costs []float64
}

// TileOrder is the value of a persistent kernel's grid.order argument: the
// runtime passes Call.Order as an i32 buffer.
type TileOrder struct{}

// Buffer finds a buffer by parameter name.
func (c *Call) Buffer(name string) (Buffer, bool) {
	for _, b := range c.Buffers {
		if b.Name == name {
			return b, true
		}
	}
	return Buffer{}, false
}

// Bind binds a request to a kernel's parameters (in launch order) under
// contract c. Every parameter gets exactly one value; aux tensors the
// request names but the kernel does not read are an error, so a typo in a
// name never silently falls back to something else.
func (c *Contract) Bind(params []artifact.Param, r Request) (*Call, error) {
	if err := c.CheckParams(params); err != nil {
		return nil, err
	}
	if err := r.Problem.Shape.Validate(); err != nil {
		return nil, err
	}
	if c.Check != nil {
		if err := c.Check(r.Problem); err != nil {
			return nil, err
		}
	}
	tiles := c.Grid(r.Problem)
	call := &Call{Kernel: c.Kernel, Grid: tiles, Tiles: tiles, contract: c, problem: r.Problem}
	persistent := slices.ContainsFunc(params, func(p artifact.Param) bool { return isGridParam(p.Name) })
	for i, g := range tiles {
		// A persistent kernel's launch grid is [programs, 1, 1]: its
		// logical y and z are arguments, not bounded by the launch's 65535.
		if g < 0 || g > math.MaxInt32 || (i > 0 && g > 65535 && !persistent) {
			return nil, fmt.Errorf("kernel %s: grid %v is out of range", c.Kernel, tiles)
		}
	}
	if persistent {
		// The kernel counts tiles in i32: tile t runs t + programs next,
		// and programs is at most the total.
		if n, ok := Product(tiles[:]...); !ok || 2*n-1 > math.MaxInt32 {
			return nil, fmt.Errorf("kernel %s: grid %v has too many tiles for a persistent kernel's i32 tile index", c.Kernel, tiles)
		}
	}
	scalars, err := c.scalarValues(r)
	if err != nil {
		return nil, err
	}
	if bm := c.BlockMask; bm != nil {
		if r.BlockMask == nil {
			return nil, fmt.Errorf("kernel %s: no block mask", c.Kernel)
		}
		for k, v := range bm.scalars(r.BlockMask) {
			scalars[k] = v
		}
	}
	auxUsed, scalarUsed := map[string]bool{}, map[string]bool{}
	bufIndex := map[string]int{}
	addBuf := func(b Buffer) int {
		if i, ok := bufIndex[b.Name]; ok {
			return i
		}
		bufIndex[b.Name] = len(call.Buffers)
		call.Buffers = append(call.Buffers, b)
		return len(call.Buffers) - 1
	}
	for _, p := range params {
		arg := Arg{Param: p, Buffer: -1}
		switch p.Kind {
		case artifact.KindTensorMap:
			// Resolved below, once the scalars it reads are bound.
		case artifact.KindPtr:
			if p.Name == tir.GridOrder {
				arg.Value = TileOrder{}
				break
			}
			b, err := c.buffer(p, r, auxUsed)
			if err != nil {
				return nil, err
			}
			arg.Buffer = addBuf(b)
		default:
			v, ok := scalars[p.Name]
			if !ok {
				switch _, aux, isLen, isMod := c.auxParam(p.Name); {
				case isMod && isLen:
					key, err := auxKey(r.Aux, p.Name[:len(p.Name)-len(".len")], aux)
					if err != nil {
						return nil, fmt.Errorf("kernel %s: %w", c.Kernel, err)
					}
					auxUsed[key] = true
					v, ok = r.Aux[key], true
				case isMod:
					key, err := scalarKey(r.Scalars, p.Name, aux)
					if err != nil {
						return nil, fmt.Errorf("kernel %s: %w", c.Kernel, err)
					}
					scalarUsed[key] = true
					v, ok = r.Scalars[key], true
				case isGridParam(p.Name):
					v, ok = gridParam(p.Name, tiles), true
				case c.isSize(p.Name):
					v, ok = problemSize(p.Name, r.Problem), true
				}
			}
			if !ok {
				return nil, fmt.Errorf("kernel %s: no value for parameter %s", c.Kernel, p.Name)
			}
			if arg.Value, err = convert(p, v); err != nil {
				return nil, fmt.Errorf("kernel %s: %w", c.Kernel, err)
			}
		}
		call.Args = append(call.Args, arg)
	}
	if err := call.resolveTensorMaps(); err != nil {
		return nil, err
	}
	if persistent && c.TileCosts != nil && r.BlockMask != nil {
		if costs := c.TileCosts(r.Problem, r.BlockMask, tiles); len(costs) == call.tileCount() {
			call.costs = costs
		}
	}
	// A valid launch as bound: one tile per program.
	call.Persist(call.tileCount())
	for _, k := range slices.Sorted(maps.Keys(r.Aux)) {
		if !auxUsed[k] {
			return nil, fmt.Errorf("kernel %s: aux tensor %q is not read by its mods (they read: %s)", c.Kernel, k, c.auxNames(params))
		}
	}
	for _, k := range slices.Sorted(maps.Keys(r.Scalars)) {
		if !scalarUsed[k] {
			names := "none"
			if ns := c.RuntimeParams(params); len(ns) > 0 {
				names = strings.Join(ns, ", ")
			}
			return nil, fmt.Errorf("kernel %s: run-time parameter %q is not read by its mods (they read: %s)", c.Kernel, k, names)
		}
	}
	return call, nil
}

// gridParam is the value of grid parameter name (tir.GridParams) for the
// logical grid tiles: its x, y and z; grid.programs is set by Persist.
func gridParam(name string, tiles [3]int) int {
	if i := slices.Index(tir.GridParams[:3], name); i >= 0 {
		return tiles[i]
	}
	return 0
}

// Persistent reports whether the call is of a persistent kernel: one that
// takes the grid parameters (tir.GridParams) and loops over the tiles of
// the logical grid (Tiles), so that it may run on fewer programs (Persist).
func (c *Call) Persistent() bool { return c.programsArg() >= 0 }

// programsArg is the index of the grid.programs argument, -1 if none.
func (c *Call) programsArg() int {
	return slices.IndexFunc(c.Args, func(a Arg) bool { return a.Param.Name == tir.GridParams[3] })
}

// tileCount is the number of tiles of the logical grid.
func (c *Call) tileCount() int { return c.Tiles[0] * c.Tiles[1] * c.Tiles[2] }

// Persist sets the number of programs a persistent call is launched on:
// programs, at most the number of tiles and at least 1, each running the
// tiles pid, pid + programs, … of the logical grid; Grid becomes
// [programs, 1, 1]. A grid of no tiles stays an empty launch (Grid
// [0, 1, 1]). Persist does nothing to a call of a kernel that is not
// persistent. Bind leaves one program per tile; a runtime that shares the
// call picks its count on a Clone.
func (c *Call) Persist(programs int) {
	i := c.programsArg()
	if i < 0 {
		return
	}
	total := c.tileCount()
	n := max(1, min(programs, total))
	c.Args[i].Value = int32(n)
	if slices.ContainsFunc(c.Args, func(a Arg) bool { return a.Param.Name == tir.GridOrder }) {
		c.Order = tileOrder(total, n, c.costs)
	}
	if total == 0 {
		n = 0
	}
	c.Grid = [3]int{n, 1, 1}
}

// Programs is the number of programs a persistent call is launched on
// (its grid.programs argument); for another call, the number of tiles.
func (c *Call) Programs() int {
	if i := c.programsArg(); i >= 0 {
		if v, ok := c.Args[i].Value.(int32); ok {
			return int(v)
		}
	}
	return c.tileCount()
}

// Clone is a copy of c whose arguments and buffers may be changed (by
// Persist) without changing c's: a call bound once and launched from
// several places.
func (c *Call) Clone() *Call {
	out := *c
	out.Args = slices.Clone(c.Args)
	out.Buffers = slices.Clone(c.Buffers)
	out.Order = slices.Clone(c.Order)
	return &out
}

// WithTensorMaps is the call for params, a kernel's parameters: those the
// call was bound to followed by tensor maps. An artifact's parameters are
// its tile-IR function's plus the tensor maps codegen added, so a call
// bound to the function (as the CPU device runs it) launches the artifact
// through this. The tensor maps are resolved from the call's arguments.
func (c *Call) WithTensorMaps(params []artifact.Param) (*Call, error) {
	if len(params) < len(c.Args) {
		return nil, fmt.Errorf("kernel %s: call has %d arguments, the kernel %d parameters", c.Kernel, len(c.Args), len(params))
	}
	for i, a := range c.Args {
		if p := params[i]; p.Name != a.Param.Name || p.Kind != a.Param.Kind {
			return nil, fmt.Errorf("kernel %s: argument %d is for %s parameter %s, the kernel's is %s %s", c.Kernel, i, a.Param.Kind, a.Param.Name, p.Kind, p.Name)
		}
	}
	if len(params) == len(c.Args) {
		return c, nil
	}
	if c.contract == nil {
		return nil, fmt.Errorf("kernel %s: the call was not bound under a contract, which tensor maps need", c.Kernel)
	}
	if err := c.contract.CheckParams(params); err != nil {
		return nil, err
	}
	out := *c
	out.Args = slices.Clone(c.Args)
	for _, p := range params[len(c.Args):] {
		if p.Kind != artifact.KindTensorMap {
			return nil, fmt.Errorf("kernel %s: parameter %s (%s) is not in the call", c.Kernel, p.Name, p.Kind)
		}
		out.Args = append(out.Args, Arg{Param: p, Buffer: -1})
	}
	if err := out.resolveTensorMaps(); err != nil {
		return nil, err
	}
	return &out, nil
}

// resolveTensorMaps sets the value of every tensor-map argument, once the
// others are bound.
func (c *Call) resolveTensorMaps() error {
	for i, a := range c.Args {
		if a.Param.Kind == artifact.KindTensorMap {
			tm, err := c.contract.tensorMap(c, a.Param, c.problem)
			if err != nil {
				return err
			}
			c.Args[i].Value = tm
		}
	}
	return nil
}

// tensorMap resolves tensor-map parameter p for a call whose other
// arguments are bound: extents from bounds or the mapped tensor's shape,
// byte strides from the stride parameters.
func (c *Contract) tensorMap(call *Call, p artifact.Param, prob Problem) (TensorMap, error) {
	tm := p.TMA
	fail := func(format string, args ...any) error {
		return fmt.Errorf("kernel %s: tensor map %s of %s: %s", c.Kernel, p.Name, tm.Tensor, fmt.Sprintf(format, args...))
	}
	size := 2 // bytes of bf16, f16
	switch p.Elem {
	case "bf16", "f16":
	case "f32":
		size = 4
	default:
		return TensorMap{}, fail("element type %q", p.Elem)
	}
	scalar := func(name string) (int, error) {
		for _, a := range call.Args {
			if a.Param.Name == name {
				if v, ok := a.Value.(int32); ok && v >= 0 {
					return int(v), nil
				}
				return 0, fail("parameter %s = %v, want a non-negative i32", name, a.Value)
			}
		}
		return 0, fail("no parameter %s", name)
	}
	buf := slices.IndexFunc(call.Buffers, func(b Buffer) bool { return b.Name == tm.Tensor })
	t := c.tensor(tm.Tensor)
	if buf < 0 || t == nil {
		return TensorMap{}, fail("no tensor %s", tm.Tensor)
	}
	dims := t.Dims(prob)
	out := TensorMap{Buffer: buf, Elem: p.Elem, Swizzle: tm.Swizzle}
	for i, d := range tm.Dims {
		n := d.Extent
		if i == 0 && d.Bound != "" {
			var err error
			if n, err = scalar(d.Bound); err != nil {
				return TensorMap{}, err
			}
		}
		if i > 0 {
			stride, err := scalar(d.Stride)
			if err != nil {
				return TensorMap{}, err
			}
			out.Strides = append(out.Strides, uint64(stride*size))
			if d.Bound != "" {
				if n, err = scalar(d.Bound); err != nil {
					return TensorMap{}, err
				}
			} else if k := slices.Index(t.Strides, d.Stride); k >= 0 {
				n = dims[k]
			} else {
				return TensorMap{}, fail("dim %d: %s is not a stride of %s", i, d.Stride, tm.Tensor)
			}
		}
		if n < 0 {
			return TensorMap{}, fail("dim %d has extent %d", i, n)
		}
		// The driver takes no empty extent; a kernel reads nothing of an
		// empty tensor.
		out.Dims = append(out.Dims, uint64(max(n, 1)))
	}
	for _, b := range tm.Box {
		out.Box = append(out.Box, uint32(b))
	}
	return out, nil
}

// Sizes are the problem sizes a kernel's mods may read (batch and
// num_heads): parameters of these names that the contract does not name
// are bound from the problem's shape.
var Sizes = []string{"batch", "num_heads"}

// isSize reports whether param is a size parameter the contract leaves to
// the shape (only kernels with mods have them).
func (c *Contract) isSize(param string) bool {
	return len(c.Mods) > 0 && slices.Contains(Sizes, param) && c.scalar(param) == nil
}

func problemSize(name string, p Problem) int {
	if name == "batch" {
		return p.Shape.Batch
	}
	return p.Shape.Heads
}

// RuntimeParams lists the run-time parameters a kernel with these
// parameters reads, by their short names ("offset").
func (c *Contract) RuntimeParams(params []artifact.Param) []string {
	var names []string
	for _, p := range params {
		if _, name, isLen, ok := c.auxParam(p.Name); ok && !isLen && p.Kind != artifact.KindPtr && p.Kind != artifact.KindTensorMap {
			names = append(names, name)
		}
	}
	return names
}

// scalarKey finds the caller's name for run-time parameter full
// ("mask.offset"): the full name, or the short one ("offset").
func scalarKey(vals map[string]any, full, short string) (string, error) {
	if _, ok := vals[full]; ok {
		return full, nil
	}
	if _, ok := vals[short]; ok {
		return short, nil
	}
	return "", fmt.Errorf("missing run-time parameter %q (parameter %s)", short, full)
}

// AuxTensors lists the aux tensors a kernel with these parameters reads,
// by their short names ("doc").
func (c *Contract) AuxTensors(params []artifact.Param) []string {
	var names []string
	for _, p := range params {
		if _, aux, isLen, ok := c.auxParam(p.Name); ok && !isLen && p.Kind == artifact.KindPtr {
			names = append(names, aux)
		}
	}
	return names
}

// auxNames lists the aux tensors a kernel reads, for errors.
func (c *Contract) auxNames(params []artifact.Param) string {
	if names := c.AuxTensors(params); len(names) > 0 {
		return strings.Join(names, ", ")
	}
	return "none"
}

// auxKey finds the caller's name for aux parameter full ("mask.doc"):
// the full name, or the short one ("doc") when no other mod uses it.
func auxKey(aux map[string]int, full, short string) (string, error) {
	if _, ok := aux[full]; ok {
		return full, nil
	}
	if _, ok := aux[short]; ok {
		return short, nil
	}
	return "", fmt.Errorf("missing aux tensor %q (parameter %s)", short, full)
}

func (c *Contract) buffer(p artifact.Param, r Request, auxUsed map[string]bool) (Buffer, error) {
	if t := c.tensor(p.Name); t != nil {
		dims := t.Dims(r.Problem)
		st := r.Strides[t.Name]
		n, err := extent(t.Name, dims, st)
		if err != nil {
			return Buffer{}, fmt.Errorf("kernel %s: %w", c.Kernel, err)
		}
		role := Input
		if t.Output {
			role = Output
		}
		return Buffer{Name: p.Name, Role: role, Elem: p.Elem, Len: n, Zeroed: t.Zeroed}, nil
	}
	if bm := c.BlockMask; bm != nil {
		if xs, ok := bm.Tensors(r.BlockMask)[p.Name]; ok {
			return Buffer{Name: p.Name, Role: BlockMaskTensor, Elem: p.Elem, Len: len(xs)}, nil
		}
	}
	if _, aux, isLen, ok := c.auxParam(p.Name); ok && !isLen {
		key, err := auxKey(r.Aux, p.Name, aux)
		if err != nil {
			return Buffer{}, fmt.Errorf("kernel %s: %w", c.Kernel, err)
		}
		auxUsed[key] = true
		return Buffer{Name: p.Name, Role: Aux, Elem: p.Elem, Len: r.Aux[key], Key: key}, nil
	}
	return Buffer{}, fmt.Errorf("kernel %s: no buffer for parameter %s", c.Kernel, p.Name)
}

// extent is the number of elements a tensor of dims with the given
// leading-dimension strides spans (the product of dims when contiguous).
func extent(name string, dims, strides []int) (int, error) {
	if strides == nil {
		n, ok := Product(dims...)
		if !ok || n > math.MaxInt32 {
			return 0, fmt.Errorf("tensor %s %v is too large for 32-bit offsets", name, dims)
		}
		return n, nil
	}
	if len(strides) != len(dims)-1 {
		return 0, fmt.Errorf("tensor %s: %d strides for %d dimensions (give all but the last, which is contiguous)", name, len(strides), len(dims))
	}
	last := 0
	for i, s := range strides {
		if s <= 0 {
			return 0, fmt.Errorf("tensor %s: stride %d is %d; strides must be positive (the last dimension is contiguous)", name, i, s)
		}
		if dims[i] > 0 {
			off, ok := Product(dims[i]-1, s)
			if !ok {
				return 0, fmt.Errorf("tensor %s: strides overflow", name)
			}
			last += off
		}
	}
	if inner := dims[len(dims)-1]; len(strides) > 0 && strides[len(strides)-1] < inner {
		return 0, fmt.Errorf("tensor %s: stride %d is smaller than the last dimension %d: rows overlap", name, strides[len(strides)-1], inner)
	}
	n := last + dims[len(dims)-1]
	if n > math.MaxInt32 {
		return 0, fmt.Errorf("tensor %s spans %d elements, more than 32-bit offsets address", name, n)
	}
	return n, nil
}

// scalarValues are the contract's scalars plus the tensors' strides.
func (c *Contract) scalarValues(r Request) (map[string]any, error) {
	out := map[string]any{}
	for _, s := range c.Scalars {
		out[s.Name] = s.Value(r.Problem)
	}
	for _, t := range c.Tensors {
		if t.Strides == nil {
			continue
		}
		st := r.Strides[t.Name]
		if st == nil {
			st = contiguous(t.Dims(r.Problem))
		}
		if len(st) != len(t.Strides) {
			return nil, fmt.Errorf("kernel %s: tensor %s takes %d strides, got %d", c.Kernel, t.Name, len(t.Strides), len(st))
		}
		for i, name := range t.Strides {
			out[name] = st[i]
		}
	}
	for name := range r.Strides {
		if t := c.tensor(name); t == nil || t.Strides == nil {
			return nil, fmt.Errorf("kernel %s: tensor %s takes no strides", c.Kernel, name)
		}
	}
	return out, nil
}

// contiguous are the row-major strides of all but the last dimension.
func contiguous(dims []int) []int {
	st := make([]int, len(dims)-1)
	acc := 1
	for i := len(dims) - 1; i > 0; i-- {
		acc *= dims[i]
		st[i-1] = acc
	}
	return st
}

// convert makes a scalar the Go type its parameter kind is passed as.
func convert(p artifact.Param, v any) (any, error) {
	switch p.Kind {
	case artifact.KindI32:
		if p.Elem == "i1" {
			// A bool parameter takes a bool, passed as 0 or 1.
			if b, ok := v.(bool); ok {
				if b {
					return int32(1), nil
				}
				return int32(0), nil
			}
			return nil, fmt.Errorf("parameter %s is bool, got %T", p.Name, v)
		}
		switch v := v.(type) {
		case int:
			if v < math.MinInt32 || v > math.MaxInt32 {
				return nil, fmt.Errorf("parameter %s = %d does not fit i32", p.Name, v)
			}
			return int32(v), nil
		case int32:
			return v, nil
		case int64:
			if v < math.MinInt32 || v > math.MaxInt32 {
				return nil, fmt.Errorf("parameter %s = %d does not fit i32", p.Name, v)
			}
			return int32(v), nil
		case bool:
			if v {
				return int32(1), nil
			}
			return int32(0), nil
		}
	case artifact.KindI64:
		switch v := v.(type) {
		case int:
			return int64(v), nil
		case int32:
			return int64(v), nil
		case int64:
			return v, nil
		}
	case artifact.KindF32:
		switch v := v.(type) {
		case float32:
			return v, nil
		case float64:
			return float32(v), nil
		case int:
			return float32(v), nil
		case int32:
			return float32(v), nil
		}
	}
	return nil, fmt.Errorf("parameter %s (%s) cannot take %T", p.Name, p.Kind, v)
}

// Tensors are a block mask's lists under this kernel's parameter names.
func (bm *BlockMaskParams) Tensors(m BlockMask) map[string][]int32 {
	if m == nil {
		return nil
	}
	c, i, fc, fi := m.Lists(bm.Transposed)
	return map[string][]int32{bm.Counts: c, bm.Indices: i, bm.FullCounts: fc, bm.FullIndices: fi}
}

// scalars are the strides of the count tensor (0 over a dimension the mask
// is shared across) and the length of an index row (the row stride of the
// index tensors: a row may be shorter than the number of blocks).
func (bm *BlockMaskParams) scalars(m BlockMask) map[string]any {
	b, h, nq, nk := m.Dims()
	kvLen, qLen := m.RowLens()
	rows, rowLen := nq, kvLen
	if bm.Transposed {
		rows, rowLen = nk, qLen
	}
	sb, sh := h*rows, rows
	if b == 1 {
		sb = 0
	}
	if h == 1 {
		sh = 0
	}
	return map[string]any{bm.StrideB: sb, bm.StrideH: sh, bm.RowLen: rowLen}
}
