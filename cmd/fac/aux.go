package main

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"

	"github.com/spf13/pflag"

	"github.com/fac-compiler/fac"
	"github.com/fac-compiler/fac/internal/npy"
	"github.com/fac-compiler/fac/lang"
	"github.com/fac-compiler/fac/launch"
	"github.com/fac-compiler/fac/tir"
)

// auxFlags are --aux NAME=FILE.npy, --random-aux and --doc-len: the mods'
// aux tensors (document ids, ALiBi slopes, a user mod's tables).
type auxFlags struct {
	specs   []string
	scalars []string
	random  bool
	docLen  int
}

func (a *auxFlags) add(fs *pflag.FlagSet) {
	fs.StringArrayVar(&a.specs, "aux", nil, "aux tensor NAME=FILE.npy for the mods (e.g. doc=doc.npy; mask.doc= for one mod only); N-D where the mod declares a shape")
	fs.StringArrayVar(&a.scalars, "scalar", nil, "run-time parameter NAME=VALUE of the mods (e.g. offset=96; repeatable)")
	fs.BoolVar(&a.random, "random-aux", false, "make up the aux tensors not given with --aux (doc: documents of --doc-len tokens; slopes: ALiBi's) and say so")
	fs.IntVar(&a.docLen, "doc-len", 1000, "with --random-aux: tokens per made-up document")
}

// auxParam is one aux tensor parameter the kernel reads.
type auxParam struct {
	mod  *lang.ModInst
	name string // "doc"
	elem tir.Elem
	dims []lang.Dim // declared shape; nil for a 1-D tensor of any length
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
				out = append(out, auxParam{mod: m, name: a.Name, elem: a.Elem, dims: a.Dims})
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
		v, err := readAux(spec, path, feeds[0])
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

// readAux reads an aux tensor: N-D (checked against the declared shape at
// launch) where the mod declares a shape, else 1-D in the parameter's
// element type.
func readAux(spec, path string, p auxParam) (any, error) {
	elem := p.elem
	arr, err := npy.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("--aux %s: %w", spec, err)
	}
	if p.dims != nil {
		return fac.Array{Shape: arr.Shape, Data: arr.Data()}, nil
	}
	if len(arr.Shape) != 1 {
		return nil, fmt.Errorf("--aux %s: shape %v; %s is declared without a shape (tensor[%s]), so it must be 1-D", spec, arr.Shape, p.name, elem)
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
	if p.dims != nil {
		return a.makeUpShaped(p, sh)
	}
	return nil, "", fmt.Errorf("--random-aux: fac cannot make up aux tensor %q (%s) of %s %s: it has no declared shape (it makes up doc, slopes and tensors declared with a shape); give --aux %s=FILE.npy",
		p.name, p.elem, p.mod.Kind(), p.mod, p.name)
}

// makeUpShaped invents a tensor of a declared shape: bools true with
// probability 3/4, integers in [0, 4), floats in [-1, 1).
func (a *auxFlags) makeUpShaped(p auxParam, sh fac.Shape) (any, string, error) {
	shape := make([]int, len(p.dims))
	for i, d := range p.dims {
		n := d.Eval(sh.Batch, sh.Heads, sh.SeqQ, sh.SeqK)
		if n <= 0 || n > 1<<28 {
			return nil, "", fmt.Errorf("--random-aux: %s's dimension %d (%s) is %d for this shape", p.name, i, d, n)
		}
		shape[i] = int(n)
	}
	total, ok := launch.Product(shape...)
	if !ok || total > 1<<28 {
		return nil, "", fmt.Errorf("--random-aux: %s of shape %v is too large to make up", p.name, shape)
	}
	rng := rand.New(rand.NewPCG(uint64(total), 11))
	var data any
	switch {
	case p.elem == tir.I1:
		xs := make([]bool, total)
		for i := range xs {
			xs[i] = rng.IntN(4) != 0
		}
		data = xs
	case p.elem.IsInt():
		xs := make([]int32, total)
		for i := range xs {
			xs[i] = int32(rng.IntN(4))
		}
		data = xs
	default:
		xs := make([]float32, total)
		for i := range xs {
			xs[i] = float32(2*rng.Float64() - 1)
		}
		data = xs
	}
	return fac.Array{Shape: shape, Data: data}, fmt.Sprintf("aux %s made up (--random-aux): random %s of shape %v", p.name, p.elem, shape), nil
}

// scalarValues parses --scalar NAME=VALUE for the run-time parameters the
// kernel's mods read: typed by the declaration; unknown, repeated or
// missing ones are errors.
func (a *auxFlags) scalarValues(fwd *fac.Forward) (map[string]any, error) {
	decl := map[string]tir.Elem{}
	var names []string
	for _, m := range []*lang.ModInst{fwd.Mask(), fwd.Score()} {
		if m == nil {
			continue
		}
		for _, p := range m.ScalarParams() {
			if _, ok := decl[p.Name]; !ok {
				names = append(names, p.Name)
			}
			decl[p.Name] = p.Elem
		}
	}
	out := map[string]any{}
	for _, spec := range a.scalars {
		name, val, ok := strings.Cut(spec, "=")
		name, val = strings.TrimSpace(name), strings.TrimSpace(val)
		if !ok || name == "" || val == "" {
			return nil, fmt.Errorf("--scalar %q: want NAME=VALUE", spec)
		}
		elem, ok := decl[name]
		if !ok {
			return nil, fmt.Errorf("--scalar %s: the kernel's mods have no run-time parameter %q (they have: %s)", spec, name, orNone(names))
		}
		if _, dup := out[name]; dup {
			return nil, fmt.Errorf("--scalar %s: %s is given twice", spec, name)
		}
		var v any
		var err error
		switch elem {
		case tir.I1:
			v, err = strconv.ParseBool(val)
		case tir.F32:
			var f float64
			f, err = strconv.ParseFloat(val, 32)
			v = float32(f)
		default:
			var n int64
			n, err = strconv.ParseInt(val, 10, 32)
			v = int32(n)
		}
		if err != nil {
			return nil, fmt.Errorf("--scalar %s: %s is %s: %v", spec, name, elem, err)
		}
		out[name] = v
	}
	for _, n := range names {
		if _, ok := out[n]; !ok {
			return nil, fmt.Errorf("the mods read run-time parameter %q (%s): give --scalar %s=VALUE", n, decl[n], n)
		}
	}
	return out, nil
}

func orNone(xs []string) string {
	if len(xs) == 0 {
		return "none"
	}
	return strings.Join(xs, ", ")
}
