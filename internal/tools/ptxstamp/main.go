// Command ptxstamp times the phases of a forward tile from inside the
// kernel (BENCHMARKS.md, session 16): it patches the PTX of the
// warp-specialized flash_fwd kernels of an AOT bundle to read %clock64 at a
// tile's phases and to write the stamps over the tile's LSE rows, and
// reports per-phase medians from the LSE that `fac run --no-check
// --lse-out` writes with such a bundle. A measuring tool for the GPU
// machine, not part of fac: the patched kernels' LSE is garbage.
//
//	go run ./internal/tools/ptxstamp patch in.bundle out.bundle
//	fac run --device cuda --bundle out.bundle --no-check --lse-out lse.npy ...   (on the GPU)
//	go run ./internal/tools/ptxstamp report lse.npy ...
//
// Stamps, per consumer warpgroup, in u64 slots of its 64 LSE rows: 0 entry
// (clock), 1 entry (globaltimer), 2 consumers start, 3 Q landed, 4 loop
// exit, 5 the last P·V done, 6 before exit (clock), 7 before exit
// (globaltimer), 8 %smid, 10–15 heads of iterations 0–5, 16 head of the
// last iteration, 17 the exit test's head, 18–19 K of iterations 0 and 1
// landed, 20–21 their V, 22 heads counted (iterations + 1).
package main

import (
	"fmt"
	"math"
	"os"
	"regexp"
	"slices"
	"strings"

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
			p, err := patch(k.PTX)
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
			fmt.Print(report(f))
		}
		return nil
	}
	return fmt.Errorf("usage: ptxstamp patch IN.bundle OUT.bundle | ptxstamp report LSE.npy...")
}

// patch inserts the stamps into a flash_fwd kernel with a producer.
func patch(ptx string) (string, error) {
	if strings.Contains(ptx, "%st0, %clock64") {
		return "", fmt.Errorf("stamped already")
	}
	lines := strings.Split(ptx, "\n")
	find := func(from int, what string, ok func(string) bool) (int, error) {
		for i := from; i < len(lines); i++ {
			if ok(lines[i]) {
				return i, nil
			}
		}
		return 0, fmt.Errorf("no %s", what)
	}
	label := func(name string) func(string) bool {
		re := regexp.MustCompile(`^\$L\S+:\s+// %` + name + `\d+$`)
		return func(s string) bool { return re.MatchString(s) }
	}
	contains := func(sub string) func(string) bool {
		return func(s string) bool { return strings.Contains(s, sub) }
	}
	closing := func(s string) bool { return strings.TrimSpace(s) == "}" }
	var err error
	at := map[string]int{}
	step := func(name string, from int, what string, ok func(string) bool) int {
		if err != nil {
			return 0
		}
		var i int
		i, err = find(from, what, ok)
		at[name] = i
		return i
	}
	step("regs", 0, "register declarations", func(s string) bool { return strings.HasPrefix(strings.TrimSpace(s), ".reg .b64") })
	step("entry", 0, "entry block", contains("// %bb.0:"))
	cons := step("consumers", 0, "setmaxnreg.inc", contains("setmaxnreg.inc"))
	join := step("join", cons, "pipe.join label", label("pipe.join"))
	step("q", step("qwait", join, "Q's wait", contains("mbarrier.try_wait")), "end of Q's wait", closing)
	hdr := step("hdr", cons, "loop header", label("for.hdr"))
	kw := step("k", step("kwait", hdr, "K's wait", contains("mbarrier.try_wait")), "end of K's wait", closing)
	step("v", step("vwait", kw, "V's wait", contains("mbarrier.try_wait")), "end of V's wait", closing)
	exit := step("exit", cons, "loop exit", label("for.exit"))
	step("tail", step("tailwait", exit, "the last P·V's wait", contains("wgmma.wait_group.sync.aligned 0;"))+1, "label after it", func(s string) bool { return strings.HasPrefix(s, "$L") })
	if err != nil {
		return "", err
	}
	ret := -1
	for i, s := range lines {
		if strings.TrimSpace(s) == "ret;" {
			ret = i
		}
	}
	after := map[int][]string{
		at["regs"]:      {".reg .b64 %st<24>;", ".reg .b32 %stc;", ".reg .b32 %str<8>;", ".reg .pred %stp<8>;"},
		at["entry"]:     {"mov.u64 %st0, %clock64;", "mov.u64 %st1, %globaltimer;"},
		at["consumers"]: {"mov.u64 %st2, %clock64;"},
		at["q"]:         {"mov.u64 %st3, %clock64;", "mov.u32 %stc, 0;"},
		at["exit"]:      {"mov.u64 %st4, %clock64;"},
		at["tail"]:      {"mov.u64 %st5, %clock64;"},
		at["k"]: {"mov.u64 %st23, %clock64;", "setp.eq.u32 %stp6, %stc, 1;", "setp.eq.u32 %stp7, %stc, 2;",
			"@%stp6 mov.u64 %st18, %st23;", "@%stp7 mov.u64 %st19, %st23;"},
		at["v"]: {"mov.u64 %st23, %clock64;", "@%stp6 mov.u64 %st20, %st23;", "@%stp7 mov.u64 %st21, %st23;"},
	}
	h := []string{"mov.u64 %st23, %clock64;"}
	for i := 0; i < 6; i++ {
		h = append(h, fmt.Sprintf("setp.eq.u32 %%stp%d, %%stc, %d;", i, i), fmt.Sprintf("@%%stp%d mov.u64 %%st%d, %%st23;", i, 10+i))
	}
	after[at["hdr"]] = append(h, "mov.u64 %st16, %st17;", "mov.u64 %st17, %st23;", "add.u32 %stc, %stc, 1;")
	// Before the exit: thread 0 of each consumer warpgroup writes the
	// stamps over its warpgroup's LSE rows of the tile (pid_m = nctaid.x -
	// 1 - ctaid.x), after a barrier of the warpgroup orders the kernel's
	// own LSE stores before them.
	store := []string{"mov.u64 %st6, %clock64;", "mov.u64 %st7, %globaltimer;",
		"mov.u32 %str0, %smid;", "cvt.u64.u32 %st8, %str0;", "cvt.u64.u32 %st22, %stc;",
		"mov.u32 %str1, %ctaid.y;", "mov.u32 %str2, %nctaid.x;", "mov.u32 %str3, %ctaid.x;",
		"sub.u32 %str3, %str2, %str3;", "sub.u32 %str3, %str3, 1;", "mad.lo.u32 %str4, %str1, %str2, %str3;",
		"mov.u32 %str5, %tid.x;", "shr.u32 %str6, %str5, 7;", "shl.b32 %str4, %str4, 7;",
		"mad.lo.u32 %str4, %str6, 64, %str4;", "mul.wide.u32 %st9, %str4, 4;",
		"ld.param.u64 %st23, [flash_fwd_param_4];", "add.s64 %st9, %st23, %st9;",
		"and.b32 %str7, %str5, 127;", "setp.eq.u32 %stp0, %str7, 0;", "add.u32 %str6, %str6, 13;", "bar.sync %str6, 128;"}
	for i := 0; i < 23; i += 2 {
		if i == 8 {
			store = append(store, "@%stp0 st.global.u64 [%st9+64], %st8;")
			continue
		}
		store = append(store, fmt.Sprintf("@%%stp0 st.global.v2.u64 [%%st9+%d], {%%st%d, %%st%d};", 8*i, i, i+1))
	}
	var out []string
	for i, s := range lines {
		if i == ret {
			out = append(out, store...)
		}
		out = append(out, s)
		out = append(out, after[i]...)
	}
	return strings.Join(out, "\n"), nil
}

// report prints the phases' medians (consumer warpgroup 0, cycles) of the
// stamps in lse (whole tiles of 128 rows).
func report(lse []float32) string {
	u := func(t, slot int) int64 {
		i := t*128 + 2*slot
		return int64(uint64(math.Float32bits(lse[i])) | uint64(math.Float32bits(lse[i+1]))<<32)
	}
	var b strings.Builder
	phase := func(name string, from, to int) {
		var d []int64
		for t := 0; t < len(lse)/128; t++ {
			d = append(d, u(t, to)-u(t, from))
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
	phase("loop (Q landed -> exit)", 3, 4)
	phase("last P·V after the loop", 4, 5)
	phase("epilogue", 5, 6)
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
