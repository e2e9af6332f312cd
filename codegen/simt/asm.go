package simt

import (
	"encoding/binary"
	"math"
	"regexp"
	"strconv"
	"strings"

	"github.com/llir/llvm/ir"
	"github.com/llir/llvm/ir/types"

	"github.com/fac-compiler/fac/internal/half"
)

// The inline asm the code generator emits, recognized once at compile
// time; an unknown string is a compile error.
var (
	barCountRE   = regexp.MustCompile(`^bar\.sync (\d+), (\d+);$`)
	barRegRE     = regexp.MustCompile(`^bar\.sync \$0, (\d+);$`) // the id in a register: pingpong's turns, a consumer group's barrier
	redVecRE     = regexp.MustCompile(`red\.relaxed\.gpu\.global\.add\.v(\d)\.f32`)
	setMaxNRegRE = regexp.MustCompile(`^setmaxnreg\.(inc|dec)\.sync\.aligned\.u32 (\d+);$`)
	bitTestRE    = regexp.MustCompile(`and\.b32 t, \$1, 0x([0-9a-f]+);\n\tsetp\.ne\.b32 \$0, t, 0;`)
	bulkReduceRE = regexp.MustCompile(`cp\.reduce\.async\.bulk\.global\.shared::cta\.bulk_group\.add\.f32 \[\$0\], \[\$1\], (\d+);`)
	mbarInitRE   = regexp.MustCompile(`mbarrier\.init(?:\.shared(?:::cta)?)?\.b64 \[(\$\d+)\], (\$\d+|\d+);`)
	mbarArriveRE = regexp.MustCompile(`mbarrier\.arrive(\.expect_tx)?(?:\.release\.cta)?(?:\.shared(?:::cta)?)?\.b64 _, \[(\$\d+)\](?:, (\$\d+|\d+))?;`)
	mbarWaitRE   = regexp.MustCompile(`mbarrier\.try_wait\.parity(?:\.acquire\.cta)?(?:\.shared(?:::cta)?)?\.b64 (\w+), \[(\$\d+)\], (\$\d+|\d+);`)
	tmaStoreRE   = regexp.MustCompile(`cp\.async\.bulk\.tensor\.(\d)d\.global\.shared::cta(?:\.tile)?\.bulk_group \[(\$\d+), \{([^}]*)\}\], \[(\$\d+)\];`)
	tmaReduceRE  = regexp.MustCompile(`cp\.reduce\.async\.bulk\.tensor\.(\d)d\.global\.shared::cta\.add(?:\.tile)?\.bulk_group \[(\$\d+), \{([^}]*)\}\], \[(\$\d+)\];`)
	bulkLoadRE   = regexp.MustCompile(`^cp\.async\.bulk\.shared::cluster\.global\.mbarrier::complete_tx::bytes \[(\$\d+)\], \[(\$\d+)\], (\$\d+), \[(\$\d+)\];$`)
	tmaLoadRE    = regexp.MustCompile(`cp\.async\.bulk\.tensor\.(\d)d\.shared::cluster\.global(?:\.tile)?\.mbarrier::complete_tx::bytes \[(\$\d+)\], \[(\$\d+), \{([^}]*)\}\], \[(\$\d+)\];`)
	wgmmaShapeRE = regexp.MustCompile(`wgmma\.mma_async\.sync\.aligned\.m64n(\d+)k16\.f32\.(bf16|f16)\.(bf16|f16) \{([^}]*)\}, (\{[^}]*\}|\$\d+), (\$\d+), p, 1, 1, (\d)(?:, (\d))?;`)
	setpRE       = regexp.MustCompile(`setp\.ne\.b32 p, (\$\d+), 0;`)
)

// The release counters' forms (codegen/sm90/tma.go): a shared u32 zeroed,
// then incremented modulo a limit by an acquire-release atomic.
const (
	asmCounterInit = "st.shared.u32 [$0], 0;"
	asmRelease     = "atom.acq_rel.cta.shared::cta.inc.u32 $0, [$1], $2;"
)

// last_arrival's forms (codegen/core/arrival.go): a fence, and thread 0's
// ticket on a global u32 counter that returns whether it was the last of
// $2 + 1 and then zeroes it.
const (
	asmFenceGPU = "fence.acq_rel.gpu;"
	asmTicket   = "{\n\t.reg .pred p;\n\t.reg .b32 t;\n\tatom.acq_rel.gpu.global.add.u32 t, [$1], 1;\n\tsetp.eq.u32 p, t, $2;\n\tmov.u32 t, 0;\n\t@p st.relaxed.gpu.global.u32 [$1], t;\n\tselp.u32 $0, 1, 0, p;\n\t}"
)

// operand is an asm operand: $k (an input, counted after the outputs) or
// an immediate.
func (c *compiler) operand(s *callSite, nout int, ref, text string) func(w *warp, l int) uint64 {
	ref = strings.TrimSpace(ref)
	if !strings.HasPrefix(ref, "$") {
		v, err := strconv.ParseUint(ref, 10, 64)
		if err != nil {
			fail("bad immediate %q in %s", ref, quote(text))
		}
		return func(*warp, int) uint64 { return v }
	}
	k, err := strconv.Atoi(ref[1:])
	if err != nil || k < nout || k-nout >= len(s.args) {
		fail("operand %s of %s is not an input", ref, quote(text))
	}
	a := s.args[k-nout]
	return func(w *warp, l int) uint64 { return w.at(a, l) }
}

// vecOf parses the vector count and element bytes after prefix, e.g.
// "v4.b16" -> 4, 2 and "b32" -> 1, 4.
func vecOf(s, prefix string) (int, int) {
	i := strings.Index(s, prefix)
	rest := s[i+len(prefix):]
	n := 1
	if strings.HasPrefix(rest, "v") && len(rest) > 3 {
		n = int(rest[1] - '0')
		rest = rest[3:]
	}
	switch {
	case strings.HasPrefix(rest, "u8"):
		return n, 1
	case strings.HasPrefix(rest, "b16"):
		return n, 2
	case strings.HasPrefix(rest, "b32"):
		return n, 4
	case strings.HasPrefix(rest, "b64"):
		return n, 8
	}
	fail("width of %s", quote(s))
	return 0, 0
}

func (c *compiler) asm(in *ir.InstCall, text string, s *callSite) op {
	nout := s.nres
	a := s.args
	void := types.Equal(in.Type(), types.Void)
	needVoid := func() {
		if !void {
			fail("asm %s with a result", quote(text))
		}
	}
	opnd := func(ref string) func(w *warp, l int) uint64 { return c.operand(s, nout, ref, text) }
	coords := func(dims, list string) []func(w *warp, l int) uint64 {
		n := int(dims[0] - '0')
		refs := strings.Split(list, ",")
		if len(refs) != n {
			fail("cp.async.bulk.tensor.%dd with %d coordinates", n, len(refs))
		}
		var out []func(w *warp, l int) uint64
		for _, r := range refs {
			out = append(out, opnd(r))
		}
		return out
	}
	readCoords := func(w *warp, l int, cs []func(w *warp, l int) uint64) []int64 {
		v := make([]int64, len(cs))
		for i, f := range cs {
			v[i] = int64(int32(uint32(f(w, l))))
		}
		return v
	}
	if strings.Contains(text, "cp.async.bulk.tensor") || strings.Contains(text, "cp.reduce.async.bulk.tensor") || bulkLoadRE.MatchString(text) {
		c.p.usesTMA, c.p.usesProxy = true, true
	}
	if strings.Contains(text, "wgmma.mma_async") {
		c.p.usesProxy = true
	}
	switch {
	// TMA and mbarriers.
	case strings.Contains(text, "cp.async.bulk.tensor") && strings.Contains(text, ".bulk_group"):
		needVoid()
		sm := tmaStoreRE.FindStringSubmatch(text)
		if sm == nil {
			fail("unparsed cp.async.bulk.tensor store asm %s", quote(text))
		}
		tm, cs, src := opnd(sm[2]), coords(sm[1], sm[3]), opnd(sm[4])
		return perLane(func(w *warp, l int) { w.tmaStore(l, tm(w, l), readCoords(w, l, cs), uint64(uint32(src(w, l)))) })
	case strings.Contains(text, "cp.reduce.async.bulk.tensor"):
		needVoid()
		sm := tmaReduceRE.FindStringSubmatch(text)
		if sm == nil {
			fail("unparsed cp.reduce.async.bulk.tensor asm %s", quote(text))
		}
		tm, cs, src := opnd(sm[2]), coords(sm[1], sm[3]), opnd(sm[4])
		pred := predicate(text, opnd)
		return perLane(func(w *warp, l int) {
			if pred(w, l) {
				w.tmaReduce(l, tm(w, l), readCoords(w, l, cs), uint64(uint32(src(w, l))))
			}
		})
	case bulkLoadRE.MatchString(text):
		needVoid()
		sm := bulkLoadRE.FindStringSubmatch(text)
		dst, src, n, bar := opnd(sm[1]), opnd(sm[2]), opnd(sm[3]), opnd(sm[4])
		return perLane(func(w *warp, l int) {
			w.cta.bulkLoad(uint64(uint32(dst(w, l))), src(w, l), int(int32(uint32(n(w, l)))), uint64(uint32(bar(w, l))))
		})
	case strings.Contains(text, "cp.async.bulk.tensor"):
		needVoid()
		sm := tmaLoadRE.FindStringSubmatch(text)
		if sm == nil {
			fail("unparsed cp.async.bulk.tensor asm %s", quote(text))
		}
		dst, tm, cs, bar := opnd(sm[2]), opnd(sm[3]), coords(sm[1], sm[4]), opnd(sm[5])
		return perLane(func(w *warp, l int) {
			w.cta.tmaLoad(uint64(uint32(dst(w, l))), tm(w, l), readCoords(w, l, cs), uint64(uint32(bar(w, l))))
		})
	case strings.Contains(text, "mbarrier.try_wait.parity"):
		needVoid()
		sm := mbarWaitRE.FindStringSubmatch(text)
		if sm == nil || !strings.Contains(text, "@!"+sm[1]+" bra ") {
			fail("unparsed mbarrier wait asm %s (want a try_wait.parity loop)", quote(text))
		}
		lab := regexp.MustCompile(`@!` + regexp.QuoteMeta(sm[1]) + ` bra (\w+);`).FindStringSubmatch(text)
		if lab == nil || !strings.Contains(text[:strings.Index(text, "mbarrier.try_wait")], lab[1]+":") {
			fail("mbarrier wait asm %s does not loop back over its try_wait", quote(text))
		}
		addr, par := opnd(sm[2]), opnd(sm[3])
		return op{block: func(w *warp, m uint32) bool {
			return w.mbarWait(m, func(l int) uint64 { return uint64(uint32(addr(w, l))) }, func(l int) uint64 { return par(w, l) })
		}}
	case strings.Contains(text, "mbarrier.arrive"):
		needVoid()
		sm := mbarArriveRE.FindStringSubmatch(text)
		if sm == nil || (sm[1] != "") != (sm[3] != "") {
			fail("unparsed mbarrier.arrive asm %s", quote(text))
		}
		addr := opnd(sm[2])
		tx := func(*warp, int) uint64 { return 0 }
		if sm[3] != "" {
			tx = opnd(sm[3])
		}
		return perLane(func(w *warp, l int) { w.cta.mbarArrive(uint64(uint32(addr(w, l))), int(int32(uint32(tx(w, l))))) })
	case strings.Contains(text, "mbarrier.init"):
		needVoid()
		sm := mbarInitRE.FindStringSubmatch(text)
		if sm == nil {
			fail("unparsed mbarrier.init asm %s", quote(text))
		}
		addr, n := opnd(sm[1]), opnd(sm[2])
		return perLane(func(w *warp, l int) { w.cta.mbarInit(uint64(uint32(addr(w, l))), int(n(w, l))) })
	case strings.Contains(text, "fence.mbarrier_init"), strings.HasPrefix(text, "prefetch.tensormap"), text == "membar.cta;",
		text == "griddepcontrol.launch_dependents;", text == "griddepcontrol.wait;":
		// Inits are visible at once (a barrier follows); the rest are hints,
		// or (griddepcontrol) about other grids, and the simulator runs one.
		return op{run: func(*warp, uint32) {}}
	case text == asmFenceGPU:
		// The simulator runs a launch's CTAs one after another over one
		// memory: every store is visible to every later access.
		return op{run: func(*warp, uint32) {}}
	case text == asmTicket:
		return perLane(func(w *warp, l int) {
			b := w.mem(1, w.at(a[0], l), 4, l, true)
			old := binary.LittleEndian.Uint32(b)
			last := old == uint32(w.at(a[1], l))
			next := old + 1
			if last {
				next = 0
			}
			binary.LittleEndian.PutUint32(b, next)
			w.set(s, 0, l, b2u(last))
		})
	case text == asmCounterInit:
		return perLane(func(w *warp, l int) {
			binary.LittleEndian.PutUint32(w.sharedWord(w.at(a[0], l), text), 0)
		})
	case text == asmRelease:
		return perLane(func(w *warp, l int) {
			word := w.sharedWord(w.at(a[0], l), text)
			old := binary.LittleEndian.Uint32(word)
			next := old + 1
			if old >= uint32(w.at(a[1], l)) {
				next = 0
			}
			binary.LittleEndian.PutUint32(word, next)
			w.set(s, 0, l, uint64(old))
		})

	// Global memory.
	case strings.Contains(text, "ld.global"):
		n, ew := vecOf(text, "ld.global.")
		if n != s.nres {
			fail("%s with %d results", quote(text), s.nres)
		}
		return perLane(func(w *warp, l int) {
			if w.at(a[1], l) == 0 {
				for e := 0; e < n; e++ {
					w.set(s, e, l, w.at(a[2+e], l))
				}
				return
			}
			b := w.mem(1, w.at(a[0], l), n*ew, l, false)
			for e := 0; e < n; e++ {
				w.set(s, e, l, readLE(b[e*ew:(e+1)*ew]))
			}
		})
	case strings.Contains(text, "prefetch.global.L2"):
		// A hint, but only for addresses inside a buffer: a prefetch the
		// kernel should have masked fails here. The predicate is $1 when
		// there is one.
		return perLane(func(w *warp, l int) {
			if len(a) < 2 || w.at(a[1], l) != 0 {
				w.mem(1, w.at(a[0], l), 1, l, false)
			}
		})
	case strings.Contains(text, "st.global"):
		n, ew := vecOf(text, "st.global.")
		if n > 1 {
			return perLane(func(w *warp, l int) {
				if w.at(a[1], l) != 0 {
					b := w.mem(1, w.at(a[0], l), n*ew, l, true)
					for e := 0; e < n; e++ {
						writeLE(b[e*ew:(e+1)*ew], w.at(a[2+e], l))
					}
				}
			})
		}
		return perLane(func(w *warp, l int) {
			if w.at(a[2], l) != 0 {
				writeLE(w.mem(1, w.at(a[0], l), ew, l, true), w.at(a[1], l))
			}
		})
	case redVecRE.MatchString(text): // red.relaxed.gpu.global.add.vN.f32 [p], {v0, …}; @p from $N+1
		n, _ := strconv.Atoi(redVecRE.FindStringSubmatch(text)[1])
		return perLane(func(w *warp, l int) {
			if len(a) < n+2 || w.at(a[n+1], l) != 0 {
				b := w.mem(1, w.at(a[0], l), 4*n, l, true)
				for i := 0; i < n; i++ {
					old := binary.LittleEndian.Uint32(b[4*i:])
					binary.LittleEndian.PutUint32(b[4*i:], math.Float32bits(math.Float32frombits(old)+f32(w.at(a[1+i], l))))
				}
			}
		})
	case strings.Contains(text, "red.relaxed.gpu.global.add.f32"):
		// The predicate is $2 when there is one (masked adds).
		return perLane(func(w *warp, l int) {
			if len(a) < 3 || w.at(a[2], l) != 0 {
				b := w.mem(1, w.at(a[0], l), 4, l, true)
				old := binary.LittleEndian.Uint32(b)
				binary.LittleEndian.PutUint32(b, math.Float32bits(math.Float32frombits(old)+f32(w.at(a[1], l))))
			}
		})

	// Conversions and predicates.
	case strings.HasPrefix(text, "cvt.rn.bf16.f32"):
		return perLane(func(w *warp, l int) { w.set(s, 0, l, uint64(half.F32ToBF16(f32(w.at(a[0], l))))) })
	case strings.HasPrefix(text, "cvt.rn.bf16x2.f32"): // d = {a: upper, b: lower}
		return perLane(func(w *warp, l int) {
			w.set(s, 0, l, uint64(half.F32ToBF16(f32(w.at(a[0], l))))<<16|uint64(half.F32ToBF16(f32(w.at(a[1], l)))))
		})
	case strings.HasPrefix(text, "cvt.rn.f16x2.f32"):
		return perLane(func(w *warp, l int) {
			w.set(s, 0, l, uint64(half.F32ToF16(f32(w.at(a[0], l))))<<16|uint64(half.F32ToF16(f32(w.at(a[1], l)))))
		})
	case strings.HasPrefix(text, "tanh.approx.f32"):
		return perLane(func(w *warp, l int) { w.set(s, 0, l, uf32(float32(math.Tanh(float64(f32(w.at(a[0], l))))))) })
	case text == "mov.pred $0, $1;": // a mask select's condition (core.maskSelect)
		return perLane(func(w *warp, l int) { w.set(s, 0, l, w.at(a[0], l)&1) })
	case bitTestRE.MatchString(text): // a bit of a mask's word (core.bitTest)
		k, _ := strconv.ParseUint(bitTestRE.FindStringSubmatch(text)[1], 16, 32)
		return perLane(func(w *warp, l int) { w.set(s, 0, l, b2u(uint32(w.at(a[0], l))&uint32(k) != 0)) })

	// Barriers: a converged warp arrives as 32 threads.
	case barCountRE.MatchString(text):
		sm := barCountRE.FindStringSubmatch(text)
		id, _ := strconv.Atoi(sm[1])
		n, _ := strconv.Atoi(sm[2])
		return op{sync: true, block: func(w *warp, m uint32) bool { return w.sync(id, n) }}
	case barRegRE.MatchString(text):
		n, _ := strconv.Atoi(barRegRE.FindStringSubmatch(text)[1])
		return op{sync: true, block: func(w *warp, m uint32) bool { return w.sync(w.uniform(a[0], text), n) }}
	case text == "bar.arrive $0, 256;":
		return op{sync: true, run: func(w *warp, m uint32) { w.cta.arrive(w.cta.barrier(w.uniform(a[0], text), 256)) }}
	case strings.Contains(text, "@p bar.arrive 1, 256;"): // pingpong's first turn
		return op{sync: true, run: func(w *warp, m uint32) {
			if w.uniform(a[0], text) == 1 {
				w.cta.arrive(w.cta.barrier(1, 256))
			}
		}}
	case setMaxNRegRE.MatchString(text):
		// A warpgroup-wide instruction: every thread of the warpgroup
		// executes it, converged.
		return op{sync: true, block: func(w *warp, m uint32) bool {
			_, ok := w.meet("setmaxnreg", nil, nil)
			return ok
		}}

	// Bulk reductions and groups.
	case strings.Contains(text, "cp.reduce.async.bulk"):
		sm := bulkReduceRE.FindStringSubmatch(text)
		if sm == nil || !strings.Contains(text, "@p cp.reduce") {
			fail("unparsed cp.reduce.async.bulk asm %s", quote(text))
		}
		n, _ := strconv.Atoi(sm[1])
		return perLane(func(w *warp, l int) {
			if w.at(a[2], l) != 0 {
				w.bulkReduce(l, w.at(a[0], l), uint64(uint32(w.at(a[1], l))), n)
			}
		})
	case text == "cp.async.bulk.commit_group;":
		return op{run: func(*warp, uint32) {}}
	case text == "cp.async.bulk.wait_group.read 0;", text == "cp.async.bulk.wait_group 0;":
		return perLane(func(w *warp, l int) { w.bulkWait(l) })

	// wgmma and the async proxy.
	case strings.Contains(text, "wgmma.mma_async"):
		return c.wgmmaAsm(text, s)
	case text == "wgmma.fence.sync.aligned;":
		return op{sync: true, run: func(w *warp, m uint32) { w.wg.fenced = true }}
	case text == "wgmma.commit_group.sync.aligned;":
		return op{sync: true, run: func(w *warp, m uint32) { w.wg.commits++ }}
	case strings.HasPrefix(text, "wgmma.wait_group.sync.aligned"):
		// wait_group N completes every group but the N most recent: the
		// registers tied through it must all belong to completed groups.
		n, err := strconv.Atoi(strings.TrimSpace(strings.TrimSuffix(strings.TrimPrefix(text, "wgmma.wait_group.sync.aligned"), ";")))
		if err != nil || n < 0 {
			fail("wgmma.wait_group with a bad count: %s", quote(text))
		}
		if !void && s.nres != len(a) {
			fail("wgmma.wait_group with %d results for %d operands", s.nres, len(a))
		}
		return op{sync: true, run: func(w *warp, m uint32) {
			for l := 0; l < 32; l++ {
				for i := range a {
					x := w.at(a[i], l)
					if g := w.groupOf(x); g >= 0 && g >= w.wg.commits-n {
						fail("wgmma.wait_group %d returns a result of group %d, still in flight (%d committed)", n, g, w.wg.commits)
					}
					x = w.resolve(x)
					if !void {
						w.set(s, i, l, x)
					}
				}
			}
			w.wg.fenced = false
		}}
	case text == "fence.proxy.async.shared::cta;":
		return perLane(func(w *warp, l int) { w.fenceProxy(l) })
	case text == "" && len(a) > 0:
		// An operand pin: its outputs are its inputs.
		return perLane(func(w *warp, l int) {
			for i := 0; i < s.nres; i++ {
				w.set(s, i, l, w.at(a[i], l))
			}
		})
	}
	fail("unknown inline asm %s", quote(text))
	return op{}
}

// predicate is the guard of an asm text that computes `setp.ne.b32 p, $k,
// 0;` and runs its instruction under @p, or always true.
func predicate(text string, opnd func(string) func(w *warp, l int) uint64) func(w *warp, l int) bool {
	m := setpRE.FindStringSubmatch(text)
	if m == nil || !strings.Contains(text, "@p ") {
		return func(*warp, int) bool { return true }
	}
	v := opnd(m[1])
	return func(w *warp, l int) bool { return v(w, l) != 0 }
}

// uniform is argument a, which must be the same in every lane.
func (w *warp) uniform(a argRef, text string) int {
	v := w.at(a, 0)
	for l := 1; l < 32; l++ {
		if w.at(a, l) != v {
			fail("%s: operand differs across the warp", quote(text))
		}
	}
	return int(v)
}

// sharedWord is the 4-byte shared word at addr (a release counter).
func (w *warp) sharedWord(addr uint64, text string) []byte {
	sh := w.cta.shared
	addr = uint64(uint32(addr))
	if addr%4 != 0 || addr+4 > uint64(len(sh)) {
		fail("%s: address %#x outside shared memory", quote(text), addr)
	}
	return sh[addr : addr+4]
}

func (c *compiler) wgmmaAsm(text string, s *callSite) op {
	sm := wgmmaShapeRE.FindStringSubmatch(text)
	pm := setpRE.FindStringSubmatch(text)
	if sm == nil || pm == nil {
		fail("unparsed wgmma asm %s", quote(text))
	}
	n, _ := strconv.Atoi(sm[1])
	nOut := n / 2
	if s.nres != nOut {
		fail("wgmma m64n%d returns %d values, want %d floats", n, s.nres, nOut)
	}
	ref := func(r string) int {
		k, err := strconv.Atoi(strings.TrimPrefix(strings.TrimSpace(r), "$"))
		if err != nil || k < nOut || k-nOut >= len(s.args) {
			fail("wgmma operand %s is not an input", r)
		}
		return k - nOut
	}
	f := &wgmmaForm{n: n, f16: sm[2] == "f16", rs: strings.HasPrefix(sm[5], "{"), descB: ref(sm[6]), scaleD: ref(pm[1])}
	if f.rs {
		for _, r := range strings.Split(strings.Trim(sm[5], "{}"), ",") {
			f.aRegs = append(f.aRegs, ref(r))
		}
		if len(f.aRegs) != 4 {
			fail("wgmma with %d A registers", len(f.aRegs))
		}
		f.transB = sm[7] == "1"
	} else {
		f.descA = ref(sm[5])
		f.transA, f.transB = sm[7] == "1", sm[8] == "1"
	}
	args := s.args
	arg := func(w *warp) func(i, l int) uint64 {
		return func(i, l int) uint64 { return w.at(args[i], l) }
	}
	return op{sync: true, block: func(w *warp, m uint32) bool {
		get := arg(w)
		return w.wgmma(f, get, get, s.res)
	}}
}
