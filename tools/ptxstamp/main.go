// Command ptxstamp times the phases of a forward tile from inside the
// kernel: it patches the PTX of the
// warp-specialized flash_fwd kernels of an AOT bundle to read %clock64 at a
// tile's phases and to write the stamps over the tile's LSE rows, and
// reports per-phase medians from the LSE that `fac run --no-check
// --lse-out` writes with such a bundle. A measuring tool for the GPU
// machine, not part of fac: the patched kernels' LSE is garbage.
//
//	go run ./tools/ptxstamp patch in.bundle out.bundle
//	fac run --device cuda --bundle out.bundle --no-check --lse-out lse.npy ...   (on the GPU)
//	go run ./tools/ptxstamp report lse.npy ...
//
// (carry the patched bundle in the folder scripts/gpu prepare makes, and
// run the middle step in a device call.)
//
// Stamps, per consumer warpgroup, in u64 slots of its 64 LSE rows: 0 entry
// (clock), 1 entry (globaltimer), 2 consumers start, 3 Q landed, 4 loop
// exit, 5 the last P·V done, 6 before exit (clock), 7 before exit
// (globaltimer), 8 %smid, 10–15 heads of iterations 0–5, 16 head of the
// last iteration, 17 the exit test's head, 18–19 K of iterations 0 and 1
// landed, 20–21 their V, 22 heads counted (iterations + 1); 24–26 in the
// epilogue, where it has them: after its first barrier of the consumers,
// after the one that follows O's exchange through shared memory, after
// O's stores.
//
// A persistent kernel (one with the grid.programs parameter) is stamped per
// tile instead (patchPersistent): 0 the program's entry, 2 consumers start,
// 3 the tile's start, 4 its Q landed, 5 loop exit, 6 the last P·V done, 7
// the tile's end, 8 %smid, 9 the tile's index within its program, 10–22 as
// above, 23 the marker persistentMark, 24–26 as above. Its stamps go over the LSE rows of
// slot k·programs + program (not of the tile the slot ran), and the
// kernel's own LSE stores are dropped so that none lands on them.
package main

import (
	"fmt"
	"math"
	"os"
	"regexp"
	"slices"
	"strings"

	"github.com/fac-compiler/fac/artifact"
	"github.com/fac-compiler/fac/artifact/bundle"
	"github.com/fac-compiler/fac/internal/npy"
)

func main() {
	if err := run(os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "ptxstamp:", err)
		os.Exit(1)
	}
}

func run(args []string) error {
	switch {
	case len(args) == 3 && args[0] == "patch":
		b, err := bundle.Read(args[1])
		if err != nil {
			return err
		}
		n := 0
		for i, k := range b.Kernels {
			if k.Ident.Kernel != "flash_fwd" || !strings.Contains(k.PTX, "setmaxnreg.inc") {
				continue
			}
			fix := patch
			if slices.ContainsFunc(k.Params, func(p artifact.Param) bool { return p.Name == "grid.programs" }) {
				fix = patchPersistent
			}
			p, err := fix(k.PTX)
			if err != nil {
				return fmt.Errorf("%s: %w", k.Ident, err)
			}
			b.Kernels[i].PTX = p
			n++
		}
		if n == 0 {
			return fmt.Errorf("%s: no warp-specialized flash_fwd kernel", args[1])
		}
		fmt.Fprintf(os.Stderr, "patched %d kernels\n", n)
		return bundle.Write(args[2], b)
	case len(args) >= 2 && args[0] == "report":
		for _, path := range args[1:] {
			a, err := npy.ReadFile(path)
			if err != nil {
				return err
			}
			f, ok := a.Data().([]float32)
			if !ok || a.Dtype != "<f4" || len(f)%128 != 0 {
				return fmt.Errorf("%s: want the f32 LSE of whole 128-row tiles, have %s %v", path, a.Dtype, a.Shape)
			}
			fmt.Printf("== %s: %d tiles\n", path, len(f)/128)
			if persistentStamps(f) {
				fmt.Print(reportPersistent(f))
			} else {
				fmt.Print(report(f))
			}
		}
		return nil
	}
	return fmt.Errorf("usage: ptxstamp patch IN.bundle OUT.bundle | ptxstamp report LSE.npy...")
}

// sites finds the lines of a kernel's PTX that stamps go after; the first
// search that fails is the error, and the later ones return 0.
type sites struct {
	lines []string
	err   error
}

// newSites splits ptx into lines, refusing a kernel stamped already.
func newSites(ptx string) (*sites, error) {
	if strings.Contains(ptx, "%st0, %clock64") {
		return nil, fmt.Errorf("stamped already")
	}
	return &sites{lines: strings.Split(ptx, "\n")}, nil
}

// find is the first line from from on that ok accepts.
func (s *sites) find(from int, what string, ok func(string) bool) int {
	if s.err != nil {
		return 0
	}
	for i := from; i < len(s.lines); i++ {
		if ok(s.lines[i]) {
			return i
		}
	}
	s.err = fmt.Errorf("no %s", what)
	return 0
}

// findOpt is the first line in [from, to) that ok accepts, or -1; a stamp
// that only some kernels have (the epilogue's) goes where it is found.
func (s *sites) findOpt(from, to int, ok func(string) bool) int {
	for i := from; i < to && i < len(s.lines); i++ {
		if ok(s.lines[i]) {
			return i
		}
	}
	return -1
}

// epilogueZero clears the epilogue's stamps at entry: a kernel without
// their sites stores zeros there, which the report takes for "none".
const epilogueZero = "mov.u64 %st24, 0; mov.u64 %st25, 0; mov.u64 %st26, 0; mov.u64 %st27, 0;"

// epilogueStamps adds stamps 24–26 to after, between tail and end: after
// the consumers' first barrier (bar.sync 0, with their thread count), the
// next one (O's exchange written), and the label where O's vector and
// scalar stores join.
func (s *sites) epilogueStamps(after map[int][]string, tail, end int) {
	bar := contains("bar.sync 0, ")
	e1 := s.findOpt(tail, end, bar)
	if e1 < 0 {
		return
	}
	after[e1] = append(after[e1], "mov.u64 %st24, %clock64;")
	e2 := s.findOpt(e1+1, end, bar)
	if e2 < 0 {
		return
	}
	after[e2] = append(after[e2], "mov.u64 %st25, %clock64;")
	if e3 := s.findOpt(e2, end, label("vec.end")); e3 >= 0 {
		after[e3] = append(after[e3], "mov.u64 %st26, %clock64;")
	}
}

// waitEnd is the end of the first mbarrier wait from from on.
func (s *sites) waitEnd(from int, what string) int {
	return s.find(s.find(from, what, contains("mbarrier.try_wait")), "end of "+what, closing)
}

// regs, entry and consumers are the register declarations, the entry block
// and the consumers' setmaxnreg.inc.
func (s *sites) regs() int {
	return s.find(0, "register declarations", func(l string) bool { return strings.HasPrefix(strings.TrimSpace(l), ".reg .b64") })
}
func (s *sites) entry() int     { return s.find(0, "entry block", contains("// %bb.0:")) }
func (s *sites) consumers() int { return s.find(0, "setmaxnreg.inc", contains("setmaxnreg.inc")) }

// tail is the label after the last P·V's wait, past the kv loop's exit.
func (s *sites) tail(exit int) int {
	return s.find(s.find(exit, "the last P·V's wait", contains("wgmma.wait_group.sync.aligned 0;"))+1, "label after it",
		func(l string) bool { return strings.HasPrefix(l, "$L") })
}

// labelRE matches the line of a label whose LLVM block is name<N>, the
// label in group 1.
func labelRE(name string) *regexp.Regexp {
	return regexp.MustCompile(`^(\$L\S+):\s+// %` + name + `\d+$`)
}

func label(name string) func(string) bool { return labelRE(name).MatchString }

func contains(sub string) func(string) bool {
	return func(l string) bool { return strings.Contains(l, sub) }
}

func closing(l string) bool { return strings.TrimSpace(l) == "}" }

// kvStamps adds the kv loop's stamps to after: at its header (hdr) the
// heads of iterations 0–5 (10–15), of the last (16) and of the exit test
// (17), counting the heads in %stc; after the first K and V waits (kw, v)
// K and V of iterations 0 and 1 landed (18–21).
func kvStamps(after map[int][]string, hdr, kw, v int) {
	after[kw] = []string{"mov.u64 %st23, %clock64;", "setp.eq.u32 %stp6, %stc, 1;", "setp.eq.u32 %stp7, %stc, 2;",
		"@%stp6 mov.u64 %st18, %st23;", "@%stp7 mov.u64 %st19, %st23;"}
	after[v] = []string{"mov.u64 %st23, %clock64;", "@%stp6 mov.u64 %st20, %st23;", "@%stp7 mov.u64 %st21, %st23;"}
	h := []string{"mov.u64 %st23, %clock64;"}
	for i := 0; i < 6; i++ {
		h = append(h, fmt.Sprintf("setp.eq.u32 %%stp%d, %%stc, %d;", i, i), fmt.Sprintf("@%%stp%d mov.u64 %%st%d, %%st23;", i, 10+i))
	}
	after[hdr] = append(h, "mov.u64 %st16, %st17;", "mov.u64 %st17, %st23;", "add.u32 %stc, %stc, 1;")
}

// wgStores are the PTX that has thread 0 of each consumer warpgroup write
// the stamps to the LSE rows at row index %str4 (its warpgroup's 64 rows
// follow), into u64 slots from addr (scratch holds the LSE pointer), after
// a barrier of the warpgroup; each write is st, given the slot pair i, i + 1.
func wgStores(addr, scratch string, st func(i int) string) []string {
	out := []string{"mov.u32 %str5, %tid.x;", "shr.u32 %str6, %str5, 7;", "shl.b32 %str4, %str4, 7;",
		"mad.lo.u32 %str4, %str6, 64, %str4;", "mul.wide.u32 " + addr + ", %str4, 4;",
		"ld.param.u64 " + scratch + ", [flash_fwd_param_4];", "add.s64 " + addr + ", " + scratch + ", " + addr + ";",
		"and.b32 %str7, %str5, 127;", "setp.eq.u32 %stp0, %str7, 0;", "add.u32 %str6, %str6, 13;", "bar.sync %str6, 128;"}
	for i := 0; i < 28; i += 2 {
		out = append(out, st(i))
	}
	return out
}

// splice is the kernel with after[i] inserted after each line i and
// before inserted before line at.
func (s *sites) splice(after map[int][]string, at int, before []string) string {
	var out []string
	for i, l := range s.lines {
		if i == at {
			out = append(out, before...)
		}
		out = append(out, l)
		out = append(out, after[i]...)
	}
	return strings.Join(out, "\n")
}

// patch inserts the stamps into a flash_fwd kernel with a producer.
func patch(ptx string) (string, error) {
	s, err := newSites(ptx)
	if err != nil {
		return "", err
	}
	regs, entry, cons := s.regs(), s.entry(), s.consumers()
	q := s.waitEnd(s.find(cons, "pipe.join label", label("pipe.join")), "Q's wait")
	hdr := s.find(cons, "loop header", label("for.hdr"))
	kw := s.waitEnd(hdr, "K's wait")
	v := s.waitEnd(kw, "V's wait")
	exit := s.find(cons, "loop exit", label("for.exit"))
	tail := s.tail(exit)
	if s.err != nil {
		return "", s.err
	}
	ret := -1
	for i, l := range s.lines {
		if strings.TrimSpace(l) == "ret;" {
			ret = i
		}
	}
	after := map[int][]string{
		regs:  {".reg .b64 %st<28>;", ".reg .b32 %stc;", ".reg .b32 %str<8>;", ".reg .pred %stp<8>;"},
		entry: {"mov.u64 %st0, %clock64;", "mov.u64 %st1, %globaltimer;", epilogueZero},
		cons:  {"mov.u64 %st2, %clock64;"},
		q:     {"mov.u64 %st3, %clock64;", "mov.u32 %stc, 0;"},
		exit:  {"mov.u64 %st4, %clock64;"},
		tail:  {"mov.u64 %st5, %clock64;"},
	}
	kvStamps(after, hdr, kw, v)
	s.epilogueStamps(after, tail, ret)
	// Before the exit: thread 0 of each consumer warpgroup writes the
	// stamps over its warpgroup's LSE rows of the tile (pid_m = nctaid.x -
	// 1 - ctaid.x), after a barrier of the warpgroup orders the kernel's
	// own LSE stores before them.
	store := []string{"mov.u64 %st6, %clock64;", "mov.u64 %st7, %globaltimer;",
		"mov.u32 %str0, %smid;", "cvt.u64.u32 %st8, %str0;", "cvt.u64.u32 %st22, %stc;",
		"mov.u32 %str1, %ctaid.y;", "mov.u32 %str2, %nctaid.x;", "mov.u32 %str3, %ctaid.x;",
		"sub.u32 %str3, %str2, %str3;", "sub.u32 %str3, %str3, 1;", "mad.lo.u32 %str4, %str1, %str2, %str3;"}
	store = append(store, wgStores("%st9", "%st23", func(i int) string {
		if i == 8 { // slot 9 holds the address
			return "@%stp0 st.global.u64 [%st9+64], %st8;"
		}
		return fmt.Sprintf("@%%stp0 st.global.v2.u64 [%%st9+%d], {%%st%d, %%st%d};", 8*i, i, i+1)
	})...)
	return s.splice(after, ret, store), nil
}

// report prints the phases' medians (consumer warpgroup 0, cycles) of the
// stamps in lse (whole tiles of 128 rows).
func report(lse []float32) string {
	var b strings.Builder
	phase := func(name string, from, to int) {
		var d []int64
		for t := 0; t < len(lse)/128; t++ {
			d = append(d, int64(stamp(lse, t, to)-stamp(lse, t, from)))
		}
		fmt.Fprintf(&b, "  %-28s median %8d  p10 %8d  p90 %8d\n", name, pct(d, 50), pct(d, 10), pct(d, 90))
	}
	phase("entry -> consumers start", 0, 2)
	phase("consumers start -> Q landed", 2, 3)
	phase("Q landed -> iteration 0", 3, 10)
	for i := 0; i < 5; i++ {
		phase(fmt.Sprintf("iteration %d", i), 10+i, 11+i)
	}
	phase("last iteration", 16, 17)
	phase("iteration 0 -> its K landed", 10, 18)
	phase("its K -> its V landed", 18, 20)
	phase("iteration 1 -> its K landed", 11, 19)
	phase("its K -> its V landed", 19, 21)
	phase("loop (Q landed -> exit)", 3, 4)
	phase("last P·V after the loop", 4, 5)
	phase("epilogue", 5, 6)
	if stamp(lse, 0, 24) != 0 {
		phase("  to its first barrier", 5, 24)
		if stamp(lse, 0, 25) != 0 {
			phase("  O into shared memory", 24, 25)
			if stamp(lse, 0, 26) != 0 {
				phase("  O stored", 25, 26)
				phase("  the rest", 26, 6)
			}
		}
	}
	phase("tile (entry -> exit)", 0, 6)
	return b.String()
}

// pct is the p-th percentile of xs (sorted in place).
func pct(xs []int64, p int) int64 {
	if len(xs) == 0 {
		return 0
	}
	slices.Sort(xs)
	return xs[(len(xs)-1)*p/100]
}

// persistentMark in slot 23 tells a persistent kernel's stamps.
const persistentMark = 0x5045525354414d50 // "PERSTAMP"

// patchPersistent stamps a persistent flash_fwd with a producer, per tile.
func patchPersistent(ptx string) (string, error) {
	s, err := newSites(ptx)
	if err != nil {
		return "", err
	}
	regs, entry, cons := s.regs(), s.entry(), s.consumers()
	tile := s.find(cons, "the tile loop's header", label("for.hdr"))
	join := s.find(tile, "pipe.join label", label("pipe.join"))
	q := s.waitEnd(join, "Q's wait")
	hdr := s.find(join, "the kv loop's header", label("for.hdr"))
	kw := s.waitEnd(hdr, "K's wait")
	v := s.waitEnd(kw, "V's wait")
	exit := s.find(hdr, "the kv loop's exit", label("for.exit"))
	tail := s.tail(exit)
	if s.err != nil {
		return "", s.err
	}
	lines := s.lines
	// The tile's end: the branch back to the tile loop's header, or, where
	// the latch is laid out right before the header, the header's line.
	tileLabel := labelRE("for.hdr").FindStringSubmatch(lines[tile])[1]
	end := -1
	for i := tail; i < len(lines); i++ {
		if strings.TrimSpace(lines[i]) == "bra.uni \t"+tileLabel+";" {
			end = i
			break
		}
	}
	if end < 0 {
		if prev := strings.TrimSpace(lines[tile-1]); strings.HasPrefix(prev, "bra") || strings.HasPrefix(prev, "@") {
			return "", fmt.Errorf("no branch back to %s after the tail", tileLabel)
		}
		end = tile
	}
	// The kernel's LSE stores (the epilogue's only 32-bit stores) go, so
	// that no tile's LSE lands on another slot's stamps.
	dropped := 0
	for i := tail; i < end; i++ {
		if strings.Contains(lines[i], "st.global.b32 ") {
			lines[i] = "\t// ptxstamp: dropped " + strings.TrimSpace(lines[i])
			dropped++
		}
	}
	if dropped == 0 {
		return "", fmt.Errorf("no LSE store in the epilogue")
	}
	after := map[int][]string{
		regs:  {".reg .b64 %st<28>;", ".reg .b64 %sta<2>;", ".reg .b32 %stc;", ".reg .b32 %stk;", ".reg .b32 %str<8>;", ".reg .pred %stp<8>;"},
		entry: {"mov.u64 %st0, %clock64;", "mov.u64 %st1, %globaltimer;", epilogueZero},
		cons:  {"mov.u64 %st2, %clock64;", "mov.u32 %stk, 0;"},
		tile:  {"mov.u64 %st3, %clock64;", "mov.u32 %stc, 0;"},
		q:     {"mov.u64 %st4, %clock64;"},
		exit:  {"mov.u64 %st5, %clock64;"},
		tail:  {"mov.u64 %st6, %clock64;"},
	}
	kvStamps(after, hdr, kw, v)
	s.epilogueStamps(after, tail, end)
	// At the tile's end: thread 0 of each consumer warpgroup writes the
	// stamps over its warpgroup's 64 LSE rows of slot k·nctaid.x + ctaid.x,
	// after a barrier of the warpgroup.
	store := []string{"mov.u64 %st7, %clock64;", "mov.u32 %str0, %smid;", "cvt.u64.u32 %st8, %str0;",
		"cvt.u64.u32 %st9, %stk;", "cvt.u64.u32 %st22, %stc;", fmt.Sprintf("mov.u64 %%st23, %d;", uint64(persistentMark)),
		"mov.u32 %str1, %ctaid.x;", "mov.u32 %str2, %nctaid.x;", "mad.lo.u32 %str4, %stk, %str2, %str1;"}
	store = append(store, wgStores("%sta0", "%sta1", func(i int) string {
		return fmt.Sprintf("@%%stp0 st.global.v2.u64 [%%sta0+%d], {%%st%d, %%st%d};", 8*i, i, i+1)
	})...)
	store = append(store, "add.u32 %stk, %stk, 1;")
	return s.splice(after, end, store), nil
}

// persistentStamps reports whether lse holds patchPersistent's stamps.
func persistentStamps(lse []float32) bool {
	return len(lse) >= 128 && stamp(lse, 0, 23) == persistentMark
}

// stamp is u64 slot of the stamps over LSE tile (or slot) t.
func stamp(lse []float32, t, slot int) uint64 {
	i := t*128 + 2*slot
	return uint64(math.Float32bits(lse[i])) | uint64(math.Float32bits(lse[i+1]))<<32
}

// reportPersistent prints the phases' medians (consumer warpgroup 0,
// cycles) of a persistent kernel's stamps, one slot per tile run.
func reportPersistent(lse []float32) string {
	n := len(lse) / 128
	programs := 0
	for s := 0; s < n; s++ {
		if stamp(lse, s, 9) == 0 {
			programs++
		}
	}
	var b strings.Builder
	fmt.Fprintf(&b, "  persistent: %d slots on %d programs\n", n, programs)
	phase := func(name string, keep func(s int) bool, d func(s int) int64) {
		var xs []int64
		for s := 0; s < n; s++ {
			if keep(s) {
				xs = append(xs, d(s))
			}
		}
		fmt.Fprintf(&b, "  %-32s median %8d  p10 %8d  p90 %8d  (%d)\n", name, pct(xs, 50), pct(xs, 10), pct(xs, 90), len(xs))
	}
	all := func(int) bool { return true }
	span := func(from, to int) func(s int) int64 {
		return func(s int) int64 { return int64(stamp(lse, s, to) - stamp(lse, s, from)) }
	}
	first := func(s int) bool { return stamp(lse, s, 9) == 0 }
	phase("entry -> consumers start", first, span(0, 2))
	phase("entry -> first tile's start", first, span(0, 3))
	phase("previous tile's end -> start", func(s int) bool { return !first(s) && s >= programs }, func(s int) int64 {
		return int64(stamp(lse, s, 3) - stamp(lse, s-programs, 7))
	})
	phase("tile start -> Q landed", all, span(3, 4))
	phase("Q landed -> iteration 0", all, span(4, 10))
	for i := 0; i < 5; i++ {
		phase(fmt.Sprintf("iteration %d", i), all, span(10+i, 11+i))
	}
	phase("last iteration", all, span(16, 17))
	phase("iteration 0 -> its K landed", all, span(10, 18))
	phase("its K -> its V landed", all, span(18, 20))
	phase("iteration 1 -> its K landed", all, span(11, 19))
	phase("its K -> its V landed", all, span(19, 21))
	phase("loop (Q landed -> exit)", all, span(4, 5))
	phase("last P·V after the loop", all, span(5, 6))
	phase("epilogue", all, span(6, 7))
	if stamp(lse, 0, 24) != 0 {
		phase("  to its first barrier", all, span(6, 24))
		if stamp(lse, 0, 25) != 0 {
			phase("  O into shared memory", all, span(24, 25))
			if stamp(lse, 0, 26) != 0 {
				phase("  O stored", all, span(25, 26))
				phase("  the rest", all, span(26, 7))
			}
		}
	}
	phase("tile (start -> end)", all, span(3, 7))
	return b.String()
}
