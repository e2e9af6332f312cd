package compiler

import (
	"encoding/json"
	"flag"
	"maps"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/fac-compiler/fac/codegen"
	"github.com/fac-compiler/fac/lang"
	"github.com/fac-compiler/fac/launch"
	"github.com/fac-compiler/fac/stdlib/attention"
	"github.com/fac-compiler/fac/tir"
)

var update = flag.Bool("update", false, "rewrite testdata/tuned_sets.json from the contracts' tuned sets")

// The tuned sets were maps keyed by "variant/DTYPE/HEAD_DIM" strings, a
// mod condition an entry "mask": "none|causal" among the arguments.
// testdata/tuned_sets.json holds every contract's sets in that form as
// the code had them (legacyTable, by kernel); TestTunedSetsAsBefore checks
// that the typed sets say the same, and TestTunedArgsAsBefore that the
// typed lookup resolves every request of a matrix to the arguments the
// former lookup (legacyTunedArgs, kept here) resolves it to on those
// tables.

// legacyTable is a contract's tuned sets in their former form.
type legacyTable = map[string][]map[string]string

// TestTunedSetsAsBefore: the contracts' typed tuned sets, written in the
// former form (legacyOf), are testdata/tuned_sets.json. A change of tuned
// values on purpose: go test ./compiler -run TestTunedSetsAsBefore -update.
func TestTunedSetsAsBefore(t *testing.T) {
	all := map[string]legacyTable{}
	for _, c := range attention.Contracts() {
		if c.Tuned != nil {
			all[c.Kernel] = legacyOf(t, c)
		}
	}
	got := formatLegacy(all)
	const file = "testdata/tuned_sets.json"
	if *update {
		if err := os.WriteFile(file, got, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	if string(got) != string(want) {
		t.Errorf("the contracts' tuned sets differ from %s (-update rewrites it, for a change on purpose):\n%s", file, got)
	}
}

// TestTunedArgsAsBefore: every stdlib kernel × target × DTYPE × HEAD_DIM
// × stdlib mask × stdlib score (and a user's own of each) × arguments
// given (tuneMatrix: 1.27 million requests) resolves to the same tuned
// arguments as under the former lookup on testdata/tuned_sets.json. The
// mods are resolved once per kernel, mask and score (modInfos, and the
// stdlib names the former lookup took), and every 64th request goes
// through tunedArgs whole.
func TestTunedArgsAsBefore(t *testing.T) {
	b, err := os.ReadFile("testdata/tuned_sets.json")
	if err != nil {
		t.Fatal(err)
	}
	var before map[string]legacyTable
	if err := json.Unmarshal(b, &before); err != nil {
		t.Fatal(err)
	}
	type modsKey struct{ kernel, mask, score string }
	infos, names := map[modsKey]map[string]launch.ModInfo{}, map[modsKey]map[string]string{}
	n, tuned, bad := 0, 0, 0
	tuneMatrix(t, func(prog *lang.Program, r tuneRequest) {
		req := r.req
		k := modsKey{req.Kernel, req.Mask, req.Score}
		if _, ok := infos[k]; !ok {
			infos[k], names[k] = modInfos(prog, req, r.cps), map[string]string{}
			for _, cp := range r.cps {
				if cp.Kind == "mask" || cp.Kind == "score" {
					names[k][cp.Name] = stdlibModName(prog, req, cp.Kind)
				}
			}
		}
		var got map[string]string
		if c, ok := attention.Contract(req.Kernel); ok && req.Target.Arch != "" {
			got = tunedFor(c, req, r.cps, infos[k])
		}
		if n%64 == 0 {
			if whole := tunedArgs(prog, req, r.cps); !maps.Equal(whole, got) || (whole == nil) != (got == nil) {
				t.Errorf("%s: tunedArgs %v, tunedFor %v", r, whole, got)
			}
		}
		n++
		want := legacyTunedArgs(req, r.cps, names[k], before[req.Kernel])
		if len(want) > 0 {
			tuned++
		}
		if !maps.Equal(got, want) || (got == nil) != (want == nil) {
			if bad++; bad <= 20 {
				t.Errorf("%s: %v, before %v", r, got, want)
			}
		}
	})
	t.Logf("%d requests, %d tuned, %d differ", n, tuned, bad)
	if tuned == 0 {
		t.Error("no request of the matrix was tuned")
	}
}

// TestTunedVariantsExist: every variant a tuned set names is the Variant
// of some target (a misspelt one would never apply), and every mod kind
// its conditions name is a stdlib mod of the condition's role.
func TestTunedVariantsExist(t *testing.T) {
	variants := map[string]bool{}
	for _, tt := range tuneTargets {
		if len(tt) == 0 {
			continue
		}
		c, err := codegen.ParseTargetConfig(tt[0], tt[1:]...)
		if err != nil {
			t.Fatal(err)
		}
		variants[c.Variant()] = true
	}
	prog, err := Load(nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range attention.Contracts() {
		for i, s := range c.Tuned {
			for _, v := range s.When.Variants {
				if !variants[v] {
					t.Errorf("%s set %d: variant %q is no target's", c.Kernel, i, v)
				}
			}
			for role, p := range map[string]launch.ModPred{"mask": s.When.Mask, "score": s.When.Score} {
				kinds, _ := p.(launch.ModIs)
				for _, k := range kinds {
					if d, ok := prog.Mod(string(k)); !ok || d.Kind != role || !strings.HasPrefix(d.Pos.Filename, "stdlib/") {
						t.Errorf("%s set %d: %s condition names %q, no stdlib %s", c.Kernel, i, role, k, role)
					}
				}
			}
		}
	}
}

// legacyOf is c's typed tuned sets in the former form: a set under the key
// of each variant, DTYPE and HEAD_DIM it is for, in order, with its mod
// conditions as entries naming the mods it holds for, joined by "|".
func legacyOf(t *testing.T, c *launch.Contract) legacyTable {
	m := legacyTable{}
	for i, s := range c.Tuned {
		set := maps.Clone(s.Args)
		for role, p := range map[string]launch.ModPred{"mask": s.When.Mask, "score": s.When.Score} {
			if p == nil {
				continue
			}
			kinds, ok := p.(launch.ModIs)
			if !ok {
				t.Fatalf("%s set %d: a %s condition of type %T has no former form", c.Kernel, i, role, p)
			}
			names := make([]string, len(kinds))
			for j, k := range kinds {
				names[j] = string(k)
			}
			set[role] = strings.Join(names, "|")
		}
		if len(s.When.DTypes) == 0 || len(s.When.HeadDims) == 0 {
			t.Fatalf("%s set %d: for any DTYPE or HEAD_DIM, which keys did not say", c.Kernel, i)
		}
		for _, v := range s.When.Variants {
			for _, dt := range s.When.DTypes {
				for _, d := range s.When.HeadDims {
					k := v + "/" + dt.String() + "/" + itoa(d)
					m[k] = append(m[k], set)
				}
			}
		}
	}
	return m
}

func itoa(n int) string { return strconv.Itoa(n) }

// legacyTunedArgs is the former lookup of tuned arguments (tunedArgs)
// on table: keys "variant/DTYPE/HEAD_DIM" of the request's text, the
// mods' stdlib names (mods, by parameter) among the given arguments.
func legacyTunedArgs(req Request, cps []*lang.CParam, mods map[string]string, table legacyTable) map[string]string {
	c, ok := attention.Contract(req.Kernel)
	if !ok || req.Target.Arch == "" {
		return nil
	}
	kinds := map[string]string{}
	for _, cp := range cps {
		kinds[cp.Name] = cp.Kind
	}
	// Since pad-dims, a head dim that is not a power of two takes the sets
	// of the one it is padded to.
	hd := req.Consts["HEAD_DIM"]
	if n, err := strconv.Atoi(hd); err == nil && strconv.Itoa(n) == hd && n > 0 {
		hd = strconv.Itoa(tir.PaddedDim(n))
	}
	var keys []string
	for _, v := range req.Target.TuneVariants() {
		keys = append(keys, v+"/"+req.Consts["DTYPE"]+"/"+hd)
	}
	declared := func(name string) bool { _, ok := kinds[name]; return ok }
	fit := maps.Clone(req.Consts)
	if fit == nil {
		fit = map[string]string{}
	}
	maps.Copy(fit, mods)
	var out map[string]string
	for k, v := range legacyTunedFor(c, table, keys, fit, declared) {
		if out == nil {
			out = map[string]string{}
		}
		out[k] = v
	}
	return out
}

// legacyTunedFor is the former launch.Contract.TunedFor on table.
func legacyTunedFor(c *launch.Contract, table legacyTable, keys []string, given map[string]string, declared func(string) bool) map[string]string {
	for _, key := range keys {
		sets, ok := table[key]
		if !ok {
			continue
		}
		for _, set := range sets {
			if got, ok := legacyFit(c, set, given, declared); ok {
				return got
			}
		}
		return nil
	}
	return nil
}

func legacyFit(c *launch.Contract, set, given map[string]string, declared func(string) bool) (map[string]string, bool) {
	out := map[string]string{}
	for k, v := range set {
		if declared != nil && !declared(k) {
			return nil, false
		}
		g, ok := given[k]
		switch {
		case slices.Contains(c.Mods, k):
			if !slices.Contains(strings.Split(v, "|"), g) {
				return nil, false
			}
		case !ok:
			out[k] = v
		case strings.TrimSpace(g) != v && !slices.Contains(c.TunedAlone, k):
			return nil, false
		}
	}
	return out, true
}

// formatLegacy is tables (by kernel) as JSON, one set a line.
func formatLegacy(tables map[string]legacyTable) []byte {
	var b strings.Builder
	b.WriteString("{\n")
	for i, k := range slices.Sorted(maps.Keys(tables)) {
		kb, _ := json.Marshal(k)
		b.WriteString("\t" + string(kb) + ": {\n")
		t := tables[k]
		for j, key := range slices.Sorted(maps.Keys(t)) {
			kb, _ := json.Marshal(key)
			b.WriteString("\t\t" + string(kb) + ": [\n")
			for s, set := range t[key] {
				sb, _ := json.Marshal(set)
				b.WriteString("\t\t\t" + string(sb) + sep(s, len(t[key])) + "\n")
			}
			b.WriteString("\t\t]" + sep(j, len(t)) + "\n")
		}
		b.WriteString("\t}" + sep(i, len(tables)) + "\n")
	}
	b.WriteString("}\n")
	return []byte(b.String())
}

func sep(i, n int) string {
	if i < n-1 {
		return ","
	}
	return ""
}
