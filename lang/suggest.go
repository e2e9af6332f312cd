package lang

import (
	"sort"
	"strings"
)

// Suggest returns the candidate closest to name when it is close enough
// to be a typo (patch_neighbourhood for patch_neighborhood, neer for near),
// else "". Close enough: an edit distance (insertions, deletions,
// substitutions, swaps of neighbours) of at most a quarter of the longer
// name, and at least 1; ties go to the first in sorted order.
func Suggest(name string, candidates []string) string {
	best, bestD := "", 0
	sorted := append([]string(nil), candidates...)
	sort.Strings(sorted)
	for _, c := range sorted {
		if c == name || c == "" {
			continue
		}
		limit := max(len(name), len(c)) / 4
		if limit < 1 {
			limit = 1
		}
		if len(name) <= 2 && len(c) <= 2 {
			continue // a one-letter difference between short names is no hint
		}
		d := editDistance(strings.ToLower(name), strings.ToLower(c))
		if d <= limit && (best == "" || d < bestD) {
			best, bestD = c, d
		}
	}
	return best
}

// didYouMean is " (did you mean X?)" for Suggest's answer, or "".
func didYouMean(name string, candidates []string) string {
	if s := Suggest(name, candidates); s != "" {
		return " (did you mean " + s + "?)"
	}
	return ""
}

// editDistance is the optimal string alignment distance of a and b
// (bytes: names are ASCII).
func editDistance(a, b string) int {
	if len(a) > 64 || len(b) > 64 {
		if a == b {
			return 0
		}
		return max(len(a), len(b)) // too long to be worth it
	}
	prev2 := make([]int, len(b)+1)
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
			if i > 1 && j > 1 && a[i-1] == b[j-2] && a[i-2] == b[j-1] {
				cur[j] = min(cur[j], prev2[j-2]+1)
			}
		}
		prev2, prev, cur = prev, cur, prev2
	}
	return prev[len(b)]
}

// visibleNames lists the names an identifier could have meant where the
// lowerer is: the locals in scope, then the program's global names and
// the built-in ones.
func (l *lowerer) visibleNames() []string {
	var out []string
	for s := l.scope; s != nil; s = s.parent {
		for n := range s.vars {
			out = append(out, n)
		}
	}
	return append(out, l.p.globalNames()...)
}

// globalNames lists the program's declared names and the built-in names.
func (p *Program) globalNames() []string {
	out := make([]string, 0, len(p.where)+len(builtinNames))
	for n := range p.where {
		out = append(out, n)
	}
	for n, ok := range builtinNames {
		if ok {
			out = append(out, n)
		}
	}
	return out
}
