package main

import (
	"fmt"
	"math"
	"slices"
	"strings"

	"github.com/spf13/pflag"

	"github.com/fac-compiler/fac"
	"github.com/fac-compiler/fac/internal/npy"
	"github.com/fac-compiler/fac/lang"
	"github.com/fac-compiler/fac/tir"
)

// auxFlags are --aux NAME=FILE.npy, --random-aux and --doc-len: the mods'
// aux tensors (document ids, ALiBi slopes, a user mod's tables).
type auxFlags struct {
	specs  []string
	random bool
	docLen int
}

func (a *auxFlags) add(fs *pflag.FlagSet) {
	fs.StringArrayVar(&a.specs, "aux", nil, "aux tensor NAME=FILE.npy for the mods, 1-D (e.g. doc=doc.npy; mask.doc= for one mod only)")
	fs.BoolVar(&a.random, "random-aux", false, "make up the aux tensors not given with --aux (doc: documents of --doc-len tokens; slopes: ALiBi's) and say so")
	fs.IntVar(&a.docLen, "doc-len", 1000, "with --random-aux: tokens per made-up document")
}

// auxParam is one aux tensor parameter the kernel reads.
type auxParam struct {
	mod  *lang.ModInst
	name string // "doc"
	elem tir.Elem
}

func (p auxParam) full() string { return p.mod.Kind() + "." + p.name }

// stdlib reports whether p belongs to the stdlib mod named mod, whose aux
// lengths fac knows.
func (p auxParam) stdlib(mod, name string) bool {
	return p.mod.Name() == mod && p.name == name && strings.HasPrefix(p.mod.Decl.Pos.Filename, "stdlib/")
}

// readParams lists the aux tensors fwd's kernel reads (Forward.AuxTensors),
// with the mod that declares each.
func readParams(fwd *fac.Forward) []auxParam {
	reads := fwd.AuxTensors()
	var out []auxParam
	for _, m := range []*lang.ModInst{fwd.Mask(), fwd.Score()} {
		if m == nil {
			continue
		}
		for _, a := range m.AuxParams() {
			if slices.Contains(reads, a.Name) {
				out = append(out, auxParam{mod: m, name: a.Name, elem: a.Elem})
			}
		}
	}
	return out
}

// describe lists aux parameters for messages: "doc (mask document)".
func describe(ps []auxParam) string {
	if len(ps) == 0 {
		return "none"
	}
	var s []string
	for _, p := range ps {
		s = append(s, fmt.Sprintf("%s (%s %s)", p.name, p.mod.Kind(), p.mod))
	}
	return strings.Join(s, ", ")
}

// load returns the aux tensors of fwd's kernel for shape sh, by name as
// Inputs.Aux takes them, and a note for each one made up. Every tensor the
// kernel reads must be given (or made up with --random-aux); a name it does
// not read, a name given twice, a file that is not 1-D, and (for the
// stdlib's doc and slopes) one too short for the shape are errors.
func (a *auxFlags) load(fwd *fac.Forward, sh fac.Shape) (map[string]any, []string, error) {
	params := readParams(fwd)
	aux := map[string]any{}
	fed := map[string]string{} // param full name → the --aux that feeds it
	for _, spec := range a.specs {
		name, path, ok := strings.Cut(spec, "=")
		if !ok || name == "" || path == "" {
			return nil, nil, fmt.Errorf("--aux %q: want NAME=FILE.npy", spec)
		}
		var feeds []auxParam
		for _, p := range params {
			if name == p.name || name == p.full() {
				feeds = append(feeds, p)
			}
		}
		if len(feeds) == 0 {
			return nil, nil, fmt.Errorf("--aux %s: the kernel's mods read no aux tensor %q (they read: %s)", spec, name, describe(params))
		}
		for _, p := range feeds {
			if prev, ok := fed[p.full()]; ok {
				return nil, nil, fmt.Errorf("--aux %s: aux tensor %s is already given by --aux %s", spec, p.name, prev)
			}
			fed[p.full()] = spec
		}
		v, err := readAux(spec, path, feeds[0].elem)
		if err != nil {
			return nil, nil, err
		}
		for _, p := range feeds {
			if err := checkAuxLen(p, v, sh, "--aux "+spec); err != nil {
				return nil, nil, err
			}
		}
		aux[name] = v
	}
	var notes []string
	for _, p := range params {
		if _, ok := fed[p.full()]; ok {
			continue
		}
		if !a.random {
			return nil, nil, fmt.Errorf("%s %s reads aux tensor %q (%s): give --aux %s=FILE.npy%s, or --random-aux to make one up",
				p.mod.Kind(), p.mod, p.name, p.elem, p.name, lenHint(p, sh))
		}
		v, note, err := a.makeUp(p, sh)
		if err != nil {
			return nil, nil, err
		}
		aux[p.full()] = v
		notes = append(notes, note)
	}
	return aux, notes, nil
}

// readAux reads a 1-D aux tensor in the parameter's element type.
func readAux(spec, path string, elem tir.Elem) (any, error) {
	arr, err := npy.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("--aux %s: %w", spec, err)
	}
	if len(arr.Shape) != 1 {
		return nil, fmt.Errorf("--aux %s: shape %v; aux tensors must be 1-D (save a flat array)", spec, arr.Shape)
	}
	if elem == tir.F32 {
		return arr.F32(), nil
	}
	v, err := arr.I32()
	if err != nil {
		return nil, fmt.Errorf("--aux %s: the mod reads %s values: %w", spec, elem, err)
	}
	return v, nil
}

// needLen is how many elements the stdlib's aux tensors need for a shape
// (document ids for every position, one slope per head), 0 where fac
// cannot know (user mods: what they index is their business).
func needLen(p auxParam, sh fac.Shape) (int, string) {
	switch {
	case p.stdlib("document", "doc"):
		return max(sh.SeqQ, sh.SeqK), "max(seqlen-q, seqlen-k)"
	case p.stdlib("alibi", "slopes"):
		return sh.Heads, "heads"
	}
	return 0, ""
}

func lenHint(p auxParam, sh fac.Shape) string {
	if n, _ := needLen(p, sh); n > 0 {
		return fmt.Sprintf(" (%d elements)", n)
	}
	return ""
}

func checkAuxLen(p auxParam, v any, sh fac.Shape, from string) error {
	n, what := needLen(p, sh)
	var have int
	switch v := v.(type) {
	case []int32:
		have = len(v)
	case []float32:
		have = len(v)
	}
	if have < n {
		return fmt.Errorf("%s: %d elements, but %s %s reads %s[0 .. %s-1] = %d elements", from, have, p.mod.Kind(), p.mod, p.name, what, n)
	}
	return nil
}

// makeUp invents an aux tensor the stdlib's mods read, for --random-aux.
func (a *auxFlags) makeUp(p auxParam, sh fac.Shape) (any, string, error) {
	switch {
	case p.name == "doc" && p.elem == tir.I32:
		n := max(sh.SeqQ, sh.SeqK)
		if a.docLen < 1 {
			return nil, "", fmt.Errorf("--doc-len %d: want a positive document length", a.docLen)
		}
		doc := make([]int32, n)
		for i := range doc {
			doc[i] = int32(i / a.docLen)
		}
		docs := (n + a.docLen - 1) / a.docLen
		return doc, fmt.Sprintf("aux %s made up (--random-aux): %d positions in %d document(s) of %d tokens (--doc-len)", p.name, n, docs, a.docLen), nil
	case p.name == "slopes" && p.elem == tir.F32:
		sl := make([]float32, sh.Heads)
		for h := range sl {
			sl[h] = float32(math.Exp2(-8 * float64(h+1) / float64(sh.Heads)))
		}
		return sl, fmt.Sprintf("aux %s made up (--random-aux): ALiBi slopes 2^(-8(h+1)/H) for %d heads", p.name, sh.Heads), nil
	}
	return nil, "", fmt.Errorf("--random-aux: fac cannot make up aux tensor %q (%s) of %s %s (it makes up doc and slopes only); give --aux %s=FILE.npy",
		p.name, p.elem, p.mod.Kind(), p.mod, p.name)
}
