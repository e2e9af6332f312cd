package blockmask

// The analytic builder's interpreter: runs a compiled program on one
// rectangle of positions.

// evaluator runs one compiled program over rectangles.
//
// For whole grids the code is also split by what each instruction depends
// on: nothing (constCode, once), q only (qCode, once per block row), kv
// only (kCode, once per block column, results kept in kTab) and both
// (qkCode, once per block). Most masks compare a function of q with a
// function of kv, so a block costs an instruction or two.
type evaluator struct {
	code   []instr
	slots  []ival // constants preset; the rest written before read
	result int32
	bSlot  int32 // -1 unless b (h) survived specialization
	hSlot  int32
	b, h   int64
	fail   error
	budget int   // abstract evaluations per undecided block
	total  int64 // abstract evaluations left for all blocks
	stack  [160]pending

	aux []*auxTable // the data of the aux tensors it reads, by position

	constCode, qCode, kCode, qkCode []instr
	kOut                            []int32    // slots of kCode that qkCode or the result read
	kTab                            []ival     // per tree node (level by level): len(kOut) hulls; grown on demand
	kBad                            []bool     // per tree node: a column's kv values may divide by zero
	levelOff                        []int      // the first node of each tree level
	grid                            *Grid      // during fill
	rowFailed                       bool       // the row's q-only values may divide by zero
	segs                            [][2]int64 // countRow's pending pieces of a row
	changes                         [2][]int64 // countRow's value changes: this row's and the last one's
	flip                            int        // which of changes is this row's
}

var errDivZero = notAnalyzable("it may divide by zero")

func (e *evaluator) setBH() {
	if e.bSlot >= 0 {
		e.slots[e.bSlot] = ival{e.b, e.b}
	}
	if e.hSlot >= 0 {
		e.slots[e.hSlot] = ival{e.h, e.h}
	}
}

// eval runs the whole program on r and returns the mask's abstract value.
func (e *evaluator) eval(r rect) ival {
	e.setBH()
	e.run(e.code, r)
	return e.slots[e.result]
}

// run runs code on r; a possible division by zero sets e.fail.
func (e *evaluator) run(code []instr, r rect) {
	s := e.slots
	for i := range code {
		in := &code[i]
		if in.op == opCmpAff && in.safe {
			s[in.dst] = cmpZero(in.pred, affRange(in.d, r))
			continue
		}
		x, y := s[in.x], s[in.y]
		var v ival
		switch in.op {
		case opAff:
			v = affRange(in.a, r)
			if !in.safe {
				v = norm(v.lo, v.hi)
			}
		case opCmpAff:
			if !in.safe {
				ra, rb := affRange(in.a, r), affRange(in.b, r)
				if r.point() || ra.lo < minI32 || ra.hi > maxI32 || rb.lo < minI32 || rb.hi > maxI32 {
					v = cmp(in.pred, norm(ra.lo, ra.hi), norm(rb.lo, rb.hi))
					break
				}
			}
			v = cmpZero(in.pred, affRange(in.d, r))
		case opAdd:
			v = norm(x.lo+y.lo, x.hi+y.hi)
		case opSub:
			v = norm(x.lo-y.hi, x.hi-y.lo)
		case opMul:
			p1, p2, p3, p4 := x.lo*y.lo, x.lo*y.hi, x.hi*y.lo, x.hi*y.hi
			v = norm(min(p1, p2, p3, p4), max(p1, p2, p3, p4))
		case opDiv:
			if y.lo <= 0 && y.hi >= 0 {
				e.fail = errDivZero
				y = ival{1, 1}
			}
			// Truncation is monotone and x/y is monotone in each operand
			// on a box avoiding y = 0: the extremes are at the corners.
			p1, p2, p3, p4 := x.lo/y.lo, x.lo/y.hi, x.hi/y.lo, x.hi/y.hi
			v = norm(min(p1, p2, p3, p4), max(p1, p2, p3, p4))
		case opRem:
			if y.lo <= 0 && y.hi >= 0 {
				e.fail = errDivZero
				y = ival{1, 1}
			}
			v = remRange(x, y)
		case opMin:
			v = ival{min(x.lo, y.lo), min(x.hi, y.hi)}
		case opMax:
			v = ival{max(x.lo, y.lo), max(x.hi, y.hi)}
		case opNeg:
			v = norm(-x.hi, -x.lo)
		case opAbs:
			switch {
			case x.lo >= 0:
				v = x
			case x.hi <= 0:
				v = norm(-x.hi, -x.lo)
			default:
				v = norm(0, max(-x.lo, x.hi))
			}
		case opIAnd, opIOr, opIXor:
			if x.lo != x.hi || y.lo != y.hi {
				v = fullI32
				break
			}
			a, b := int32(x.lo), int32(y.lo)
			w := a & b
			if in.op == opIOr {
				w = a | b
			} else if in.op == opIXor {
				w = a ^ b
			}
			v = ival{int64(w), int64(w)}
		case opINot:
			if x.lo != x.hi {
				v = fullI32
				break
			}
			v = ival{int64(^int32(x.lo)), int64(^int32(x.lo))}
		case opBAnd:
			v = ival{min(x.lo, y.lo), min(x.hi, y.hi)}
		case opBOr:
			v = ival{max(x.lo, y.lo), max(x.hi, y.hi)}
		case opBXor:
			if x.lo != x.hi || y.lo != y.hi {
				v = bMaybe
				break
			}
			v = ival{x.lo ^ y.lo, x.lo ^ y.lo}
		case opBNot:
			v = ival{1 - x.hi, 1 - x.lo}
		case opCmp:
			v = cmp(in.pred, x, y)
		case opLoad:
			v = e.load(in, x)
		case opSelect:
			switch {
			case x.lo == 1:
				v = y
			case x.hi == 0:
				v = s[in.z]
			default:
				z := s[in.z]
				v = ival{min(y.lo, z.lo), max(y.hi, z.hi)}
			}
		}
		s[in.dst] = v
	}
}

// load bounds a load of aux tensor in.aux at the indices x: the data's
// range over them where the mask may hold, the other value where it may
// not. A load that may read outside the tensor where the mask holds sets
// e.fail, like a division by zero: undecided until a position shows it.
func (e *evaluator) load(in *instr, x ival) ival {
	t := e.aux[in.aux]
	mask, other := bTrue, ival{}
	if in.y >= 0 {
		mask, other = e.slots[in.y], e.slots[in.z]
	}
	if mask.hi == 0 {
		return other
	}
	lo, hi := max(x.lo, 0), min(x.hi, int64(len(t.vals))-1)
	if lo != x.lo || hi != x.hi {
		e.fail = t.errOOB
		if lo > hi {
			return other
		}
	}
	v := t.hull(lo, hi)
	if mask.lo == 0 {
		v = ival{min(v.lo, other.lo), max(v.hi, other.hi)}
	}
	return v
}
