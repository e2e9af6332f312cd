package cpu

import (
	"errors"
	"fmt"
	"math"
	"sync"

	"github.com/fac-compiler/fac/tir"
)

// maxCallDepth bounds call nesting so that a recursive module gives an
// error instead of overflowing the goroutine stack (which is fatal).
const maxCallDepth = 256

// slot holds one SSA value: elements in f, or pointers in p.
//
// Storage discipline: ops that compute a value write into their slot's own
// storage, allocated on first use and reused on every later execution.
// const, arange, reshape and if results instead alias storage computed
// elsewhere; that is safe because in SSA an aliased value is dead before its
// source is recomputed. Values that cross a loop iteration or a call
// boundary (for results and carried arguments, call results) are copied.
type slot struct {
	f []float64
	p []Pointer
}

// frame is the slots of one activation of a function.
type frame struct {
	x    *fn
	s    []slot
	args []slot // own storage for arguments bound from Go values
}

func (x *fn) getFrame() *frame {
	if fr, ok := x.pool.Get().(*frame); ok {
		return fr
	}
	return &frame{x: x, s: make([]slot, len(x.types)), args: make([]slot, len(x.params))}
}

func (x *fn) putFrame(fr *frame) { x.pool.Put(fr) }

// out returns slot id's own element storage.
func (fr *frame) out(id, n int) []float64 {
	s := &fr.s[id]
	if s.f == nil {
		s.f = make([]float64, n)
	}
	return s.f
}

// outP returns slot id's own pointer storage.
func (fr *frame) outP(id, n int) []Pointer {
	s := &fr.s[id]
	if s.p == nil {
		s.p = make([]Pointer, n)
	}
	return s.p
}

// assign copies src into dst's own storage.
func assign(dst *slot, src slot, t tir.Type) {
	n := t.NumElems()
	if t.Ptr {
		if dst.p == nil {
			dst.p = make([]Pointer, n)
		}
		copy(dst.p, src.p)
		return
	}
	if dst.f == nil {
		dst.f = make([]float64, n)
	}
	copy(dst.f, src.f)
}

// machine is the state of one running program.
type machine struct {
	pid   [3]int
	grid  [3]int
	group int
	depth int
	cur   *inst // op being executed, for errors
}

// opError is an error at an op, made into an *Error at the entry point.
type opError struct {
	in  *inst
	msg string
}

func (e *opError) Error() string { return e.msg }

func (m *machine) fail(format string, args ...any) error {
	return &opError{in: m.cur, msg: fmt.Sprintf(format, args...)}
}

// run executes x's body in fr and returns its terminator. Panics (which
// only malformed IR should cause) become errors naming the op.
func (m *machine) run(x *fn, fr *frame) (t *inst, err error) {
	defer func() {
		if r := recover(); r != nil {
			t, err = nil, m.fail("internal error: %v", r)
		}
	}()
	// A program of consumer groups runs each in turn: they share nothing
	// but their inputs.
	for g := 0; g < x.groups && err == nil; g++ {
		m.cur, m.depth, m.group = nil, 0, g
		t, err = m.exec(fr, x.body)
	}
	if err == nil && (t == nil && len(x.f.Result) > 0 || t != nil && (t.k != tir.OpReturn || len(t.a) != len(x.f.Result))) {
		err = m.fail("@%s does not end with return of %d values", x.f.Name, len(x.f.Result))
	}
	return t, err
}

var errDivZero = errors.New("integer division by zero")

// exec runs a block until its terminator, which it returns (nil if none).
func (m *machine) exec(fr *frame, b *block) (*inst, error) {
	s := fr.s
	for i := range b.code {
		in := &b.code[i]
		m.cur = in
		var err error
		switch k := in.k; {
		case k == tir.OpYield || k == tir.OpReturn:
			return in, nil
		case k == tir.OpConst || k == tir.OpArange:
			s[in.r[0]].f = in.cdata
		case k == tir.OpProgramID:
			fr.out(in.r[0], 1)[0] = float64(m.pid[in.code])
		case k == tir.OpNumPrograms:
			fr.out(in.r[0], 1)[0] = float64(m.grid[in.code])
		case k == tir.OpGroupID:
			fr.out(in.r[0], 1)[0] = float64(m.group)
		case k == tir.OpNumSMs:
			fr.out(in.r[0], 1)[0] = 1 // one processor runs each program: a prefetch hint only
		case k == tir.OpPrefetch:
			err = prefetch(in, s)
		case k == tir.OpSplat:
			if in.ptr {
				fill(fr.outP(in.r[0], in.n), s[in.a[0]].p[0])
			} else {
				fill(fr.out(in.r[0], in.n), s[in.a[0]].f[0])
			}
		case k == tir.OpReshape:
			s[in.r[0]] = s[in.a[0]]
		case k == tir.OpBroadcast || k == tir.OpTrans:
			if in.ptr {
				gather(fr.outP(in.r[0], in.n), s[in.a[0]].p, in.shape, in.strides)
			} else {
				gather(fr.out(in.r[0], in.n), s[in.a[0]].f, in.shape, in.strides)
			}
		case k.IsBinary():
			err = binary(in, fr.out(in.r[0], in.n), s[in.a[0]].f, s[in.a[1]].f)
		case k.IsUnary():
			err = unary(in, fr.out(in.r[0], in.n), s[in.a[0]].f)
		case k == tir.OpCmp:
			compare(in.code, fr.out(in.r[0], in.n), s[in.a[0]].f, s[in.a[1]].f)
		case k == tir.OpSelect:
			c := s[in.a[0]].f
			if in.ptr {
				sel(fr.outP(in.r[0], in.n), c, s[in.a[1]].p, s[in.a[2]].p)
			} else {
				sel(fr.out(in.r[0], in.n), c, s[in.a[1]].f, s[in.a[2]].f)
			}
		case k == tir.OpCast:
			cast(in, fr.out(in.r[0], in.n), s[in.a[0]].f)
		case k == tir.OpAddPtr:
			d, p, off := fr.outP(in.r[0], in.n), s[in.a[0]].p, s[in.a[1]].f
			for i := range d {
				d[i] = Pointer{p[i].Buf, p[i].Off + int64(off[i])}
			}
		case k == tir.OpLoad:
			err = load(in, s, fr.out(in.r[0], in.n))
		case k == tir.OpStore:
			err = store(in, s)
		case k == tir.OpAtomicAdd:
			err = atomicAdd(in, s)
		case k == tir.OpLastArrival:
			err = lastArrival(in, s, fr.out(in.r[0], 1))
		case k == tir.OpDot:
			dot(in, fr.out(in.r[0], in.n), s[in.a[0]].f, s[in.a[1]].f, s[in.a[2]].f)
		case k == tir.OpReduce:
			reduce(in, fr.out(in.r[0], in.n), s[in.a[0]].f)
		case k == tir.OpFor:
			err = m.loop(fr, in)
		case k == tir.OpIf:
			err = m.branch(fr, in)
		case k == tir.OpCall:
			err = m.call(fr, in)
		default:
			err = fmt.Errorf("unknown op %s", k)
		}
		if err != nil {
			if _, ok := err.(*opError); !ok {
				err = &opError{in: in, msg: err.Error()}
			}
			return nil, err
		}
	}
	return nil, nil
}

func (m *machine) loop(fr *frame, in *inst) error {
	s, types := fr.s, fr.x.types
	lo, hi, step := toInt(s[in.a[0]].f[0]), toInt(s[in.a[1]].f[0]), toInt(s[in.a[2]].f[0])
	if step <= 0 {
		return m.fail("for step must be > 0, got %d", step)
	}
	body := in.regions[0]
	for j, r := range in.r {
		assign(&s[r], s[in.a[3+j]], types[r])
	}
	// The results hold the carried values between iterations; the body
	// arguments get copies so the body may recompute its own values freely.
	for iv := lo; iv < hi; iv += step {
		fr.out(body.args[0], 1)[0] = float64(iv)
		for j, r := range in.r {
			assign(&s[body.args[1+j]], s[r], types[r])
		}
		t, err := m.exec(fr, body)
		if err != nil {
			return err
		}
		m.cur = in
		if t == nil || t.k != tir.OpYield || len(t.a) != len(in.r) {
			return m.fail("for body does not end with yield of %d values", len(in.r))
		}
		for j, r := range in.r {
			assign(&s[r], s[t.a[j]], types[r])
		}
	}
	return nil
}

func (m *machine) branch(fr *frame, in *inst) error {
	var b *block
	switch {
	case fr.s[in.a[0]].f[0] != 0:
		b = in.regions[0]
	case len(in.regions) > 1:
		b = in.regions[1]
	default:
		return nil
	}
	t, err := m.exec(fr, b)
	if err != nil {
		return err
	}
	m.cur = in
	if t == nil && len(in.r) == 0 {
		return nil
	}
	if t == nil || t.k != tir.OpYield || len(t.a) != len(in.r) {
		return m.fail("if region does not end with yield of %d values", len(in.r))
	}
	for j, r := range in.r {
		fr.s[r] = fr.s[t.a[j]]
	}
	return nil
}

func (m *machine) call(fr *frame, in *inst) error {
	if m.depth >= maxCallDepth {
		return m.fail("calls nested deeper than %d", maxCallDepth)
	}
	x := in.callee
	cf := x.getFrame()
	for j, p := range x.params {
		cf.s[p] = fr.s[in.a[j]]
	}
	m.depth++
	t, err := m.exec(cf, x.body)
	m.depth--
	if err != nil {
		return err
	}
	m.cur = in
	if t == nil && len(in.r) > 0 || t != nil && (t.k != tir.OpReturn || len(t.a) != len(in.r)) {
		return m.fail("@%s does not end with return of %d values", x.f.Name, len(in.r))
	}
	for j, r := range in.r {
		assign(&fr.s[r], cf.s[t.a[j]], fr.x.types[r])
	}
	x.putFrame(cf)
	return nil
}

func fill[T any](d []T, v T) {
	for i := range d {
		d[i] = v
	}
}

func sel[T any](d []T, c []float64, x, y []T) {
	for i := range d {
		if c[i] != 0 {
			d[i] = x[i]
		} else {
			d[i] = y[i]
		}
	}
}

// gather sets dst (row-major over shape) to src read with the given
// per-dimension strides: broadcast uses stride 0 on repeated dims, trans
// swaps the strides.
func gather[T any](dst, src []T, shape, st []int) {
	r := len(shape)
	if r == 0 {
		dst[0] = src[0]
		return
	}
	var buf [8]int
	idx := buf[:0]
	if r-1 <= len(buf) {
		idx = buf[:r-1]
	} else {
		idx = make([]int, r-1)
	}
	inner, ist := shape[r-1], st[r-1]
	for o := 0; o < len(dst); o += inner {
		base := 0
		for d, i := range idx {
			base += i * st[d]
		}
		row := dst[o : o+inner]
		switch ist {
		case 0:
			fill(row, src[base])
		case 1:
			copy(row, src[base:base+inner])
		default:
			for j := range row {
				row[j] = src[base+j*ist]
			}
		}
		for d := r - 2; d >= 0; d-- {
			if idx[d]++; idx[d] < shape[d] {
				break
			}
			idx[d] = 0
		}
	}
}

func binary(in *inst, d, a, b []float64) error {
	switch in.e {
	case tir.I32:
		return intBinary[int32](in.k, d, a, b)
	case tir.I64:
		return intBinary[int64](in.k, d, a, b)
	case tir.I1:
		if err := intBinary[int64](in.k, d, a, b); err != nil {
			return err
		}
		for i, v := range d {
			d[i] = float64(int64(v) & 1)
		}
		return nil
	}
	switch in.k {
	case tir.OpAdd:
		for i := range d {
			d[i] = a[i] + b[i]
		}
	case tir.OpSub:
		for i := range d {
			d[i] = a[i] - b[i]
		}
	case tir.OpMul:
		for i := range d {
			d[i] = a[i] * b[i]
		}
	case tir.OpDiv:
		for i := range d {
			d[i] = a[i] / b[i]
		}
	case tir.OpRem:
		for i := range d {
			d[i] = math.Mod(a[i], b[i])
		}
	case tir.OpMin: // Go's min/max propagate NaN, as the GPU's do
		for i := range d {
			d[i] = min(a[i], b[i])
		}
	case tir.OpMax:
		for i := range d {
			d[i] = max(a[i], b[i])
		}
	default:
		return fmt.Errorf("%s on %s", in.k, in.e)
	}
	fixSlice(in.e, d)
	return nil
}

// intBinary computes in T so that arithmetic wraps like the hardware's.
func intBinary[T int32 | int64](k tir.Kind, d, a, b []float64) error {
	switch k {
	case tir.OpAdd:
		for i := range d {
			d[i] = float64(T(a[i]) + T(b[i]))
		}
	case tir.OpSub:
		for i := range d {
			d[i] = float64(T(a[i]) - T(b[i]))
		}
	case tir.OpMul:
		for i := range d {
			d[i] = float64(T(a[i]) * T(b[i]))
		}
	case tir.OpDiv:
		for i := range d {
			y := T(b[i])
			if y == 0 {
				return errDivZero
			}
			d[i] = float64(T(a[i]) / y)
		}
	case tir.OpRem:
		for i := range d {
			y := T(b[i])
			if y == 0 {
				return errDivZero
			}
			d[i] = float64(T(a[i]) % y)
		}
	case tir.OpMin:
		for i := range d {
			d[i] = min(a[i], b[i])
		}
	case tir.OpMax:
		for i := range d {
			d[i] = max(a[i], b[i])
		}
	case tir.OpAnd:
		for i := range d {
			d[i] = float64(T(a[i]) & T(b[i]))
		}
	case tir.OpOr:
		for i := range d {
			d[i] = float64(T(a[i]) | T(b[i]))
		}
	case tir.OpXor:
		for i := range d {
			d[i] = float64(T(a[i]) ^ T(b[i]))
		}
	}
	return nil
}

func unary(in *inst, d, a []float64) error {
	if !in.e.IsFloat() {
		for i, v := range a {
			x := toInt(v)
			switch {
			case in.k == tir.OpNeg:
				x = -x
			case in.k == tir.OpAbs && x < 0:
				x = -x
			case in.k == tir.OpNot && in.e == tir.I1:
				x = 1 - x
			case in.k == tir.OpNot:
				x = ^x
			case in.k != tir.OpAbs:
				return fmt.Errorf("%s on %s", in.k, in.e)
			}
			d[i] = fix(in.e, float64(x)) // wraps -MinInt32 back to MinInt32
		}
		return nil
	}
	var f func(float64) float64
	switch in.k {
	case tir.OpNeg:
		for i, v := range a {
			d[i] = -v
		}
		return nil
	case tir.OpAbs:
		f = math.Abs
	case tir.OpExp:
		f = math.Exp
	case tir.OpExp2:
		f = math.Exp2
	case tir.OpLog:
		f = math.Log
	case tir.OpLog2:
		f = math.Log2
	case tir.OpTanh:
		f = math.Tanh
	case tir.OpSqrt:
		f = math.Sqrt
	default:
		return fmt.Errorf("%s on %s", in.k, in.e)
	}
	for i, v := range a {
		d[i] = f(v)
	}
	fixSlice(in.e, d)
	return nil
}

func b2f(b bool) float64 {
	if b {
		return 1
	}
	return 0
}

// compare uses Go's float comparisons, which are IEEE's: ordered (false on
// NaN) except !=. Integers are exact in float64.
func compare(pred int, d, a, b []float64) {
	switch pred {
	case predEQ:
		for i := range d {
			d[i] = b2f(a[i] == b[i])
		}
	case predNE:
		for i := range d {
			d[i] = b2f(a[i] != b[i])
		}
	case predLT:
		for i := range d {
			d[i] = b2f(a[i] < b[i])
		}
	case predLE:
		for i := range d {
			d[i] = b2f(a[i] <= b[i])
		}
	case predGT:
		for i := range d {
			d[i] = b2f(a[i] > b[i])
		}
	case predGE:
		for i := range d {
			d[i] = b2f(a[i] >= b[i])
		}
	}
}

func cast(in *inst, d, a []float64) {
	switch {
	case in.e == tir.I1:
		for i, v := range a {
			d[i] = b2f(v != 0)
		}
	case in.ae.IsFloat() && in.e.IsInt():
		// Truncate toward zero, saturating; NaN gives 0.
		lo, hi := float64(math.MinInt32), float64(math.MaxInt32)
		if in.e == tir.I64 {
			lo, hi = -1<<63, math.Nextafter(1<<63, 0)
		}
		for i, v := range a {
			switch {
			case v != v:
				d[i] = 0
			case v <= lo:
				d[i] = lo
			case v >= hi:
				d[i] = hi
			default:
				d[i] = math.Trunc(v) + 0 // + 0 turns -0.0 into the integer 0
			}
		}
	default: // float rounding, int wraparound; i1 is already 0/1
		copy(d, a)
		fixSlice(in.e, d)
	}
}

func load(in *inst, s []slot, d []float64) error {
	ptrs := s[in.a[0]].p
	var mask, other []float64
	if len(in.a) == 3 {
		mask, other = s[in.a[1]].f, s[in.a[2]].f
	}
	for i, p := range ptrs {
		if mask != nil && mask[i] == 0 {
			d[i] = other[i]
			continue
		}
		if err := check("load", p); err != nil {
			return err
		}
		d[i] = p.Buf.Vals[p.Off]
	}
	// Buffers built by hand may hold values finer than their type.
	fixSlice(in.e, d)
	return nil
}

// prefetch checks the addresses a GPU would prefetch, as a load's, so that
// a kernel's hint that strays outside its tensors fails here, and reads
// nothing.
func prefetch(in *inst, s []slot) error {
	return eachLive(in, s, 1, "prefetch", func(int, Pointer) {})
}

func store(in *inst, s []slot) error {
	vals := s[in.a[1]].f
	return eachLive(in, s, 2, "store", func(i int, p Pointer) { p.Buf.Vals[p.Off] = fix(p.Buf.Elem, vals[i]) })
}

// eachLive calls f for each pointer of in's first operand whose mask
// (operand mi, when in has one) holds, once it is checked in bounds.
func eachLive(in *inst, s []slot, mi int, what string, f func(i int, p Pointer)) error {
	var mask []float64
	if len(in.a) > mi {
		mask = s[in.a[mi]].f
	}
	for i, p := range s[in.a[0]].p {
		if mask != nil && mask[i] == 0 {
			continue
		}
		if err := check(what, p); err != nil {
			return err
		}
		f(i, p)
	}
	return nil
}

// atomicMu serializes atomic_add across the concurrent programs of every
// launch: each element's read-modify-write is then atomic, as on a GPU
// (the order of the adds, and so the rounding, may differ run to run).
var atomicMu sync.Mutex

func atomicAdd(in *inst, s []slot) error {
	vals := s[in.a[1]].f
	atomicMu.Lock()
	defer atomicMu.Unlock()
	return eachLive(in, s, 2, "atomic_add", func(i int, p Pointer) {
		p.Buf.Vals[p.Off] = fix(p.Buf.Elem, p.Buf.Vals[p.Off]+vals[i])
	})
}

// lastArrival takes program in's ticket on its counter under atomicMu:
// the programs run concurrently, and the lock orders each one's stores
// before its call before the last one's reads after its call (Go's
// happens-before through the mutex). The last of n sets the counter back
// to 0 and gets true.
func lastArrival(in *inst, s []slot, d []float64) error {
	p, n := s[in.a[0]].p[0], int64(s[in.a[1]].f[0])
	if n < 1 {
		return fmt.Errorf("last_arrival of %d programs: want at least 1", n)
	}
	if err := check("last_arrival", p); err != nil {
		return err
	}
	atomicMu.Lock()
	defer atomicMu.Unlock()
	old := int64(p.Buf.Vals[p.Off])
	if old < 0 || old >= n {
		return fmt.Errorf("last_arrival: counter %q[%d] holds %d, not 0 to %d: it was not zeroed before the launch, or its programs disagree on n", p.Buf.Name, p.Off, old, n-1)
	}
	last := old == n-1
	p.Buf.Vals[p.Off] = float64((old + 1) % n)
	d[0] = 0
	if last {
		d[0] = 1
	}
	return nil
}

func check(what string, p Pointer) error {
	if p.Buf == nil {
		return fmt.Errorf("%s through a null pointer", what)
	}
	if p.Off < 0 || p.Off >= int64(len(p.Buf.Vals)) {
		return fmt.Errorf("%s out of bounds: buffer %q has %d elements, index %d", what, p.Buf.Name, len(p.Buf.Vals), p.Off)
	}
	return nil
}

// dot accumulates in the accumulator's type, rounding after every
// multiply-add, in k order for each output element.
func dot(in *inst, d, a, b, c []float64) {
	M, K, N := in.x, in.y, in.z
	copy(d, c)
	for i := 0; i < M; i++ {
		row := d[i*N : (i+1)*N]
		for k := 0; k < K; k++ {
			aik, brow := a[i*K+k], b[k*N:(k+1)*N]
			switch in.e {
			case tir.F32:
				for j, bv := range brow {
					row[j] = float64(float32(row[j] + aik*bv))
				}
			case tir.I32:
				for j, bv := range brow {
					row[j] = float64(int32(row[j]) + int32(aik)*int32(bv))
				}
			default:
				for j, bv := range brow {
					row[j] = fix(in.e, row[j]+aik*bv)
				}
			}
		}
	}
}

// reduce folds the middle axis of [outer, len, inner] sequentially.
func reduce(in *inst, d, a []float64) {
	outer, n, inner := in.x, in.y, in.z
	for o := 0; o < outer; o++ {
		dst, src := d[o*inner:(o+1)*inner], a[o*n*inner:(o+1)*n*inner]
		copy(dst, src[:inner])
		for l := 1; l < n; l++ {
			row := src[l*inner : (l+1)*inner]
			switch {
			case in.code == redMax:
				for j, v := range row {
					dst[j] = max(dst[j], v)
				}
			case in.code == redMin:
				for j, v := range row {
					dst[j] = min(dst[j], v)
				}
			case in.e == tir.F32:
				for j, v := range row {
					dst[j] = float64(float32(dst[j] + v))
				}
			default:
				for j, v := range row {
					dst[j] = fix(in.e, dst[j]+v)
				}
			}
		}
	}
}
