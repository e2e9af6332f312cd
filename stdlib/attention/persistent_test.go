package attention_test

import (
	"maps"
	"slices"
	"strings"
	"testing"

	"github.com/fac-compiler/fac/compiler"
	"github.com/fac-compiler/fac/launch"
	"github.com/fac-compiler/fac/stdlib/attention"
	"github.com/fac-compiler/fac/tir"
)

// TestPersistentContracts: the forward kernels compiled with persistent =
// true take the grid parameters last, and their contracts accept them.
func TestPersistentContracts(t *testing.T) {
	for _, c := range []*launch.Contract{attention.FlashFwd, attention.FlashFwdSinks} {
		for _, mask := range []string{"", "document"} {
			res, err := compiler.Compile(compiler.Request{Kernel: c.Kernel, Mask: mask, Consts: map[string]string{"persistent": "true"}})
			if err != nil {
				t.Fatalf("%s mask=%q: %v", c.Kernel, mask, err)
			}
			var names []string
			for _, p := range res.Params() {
				names = append(names, p.Name)
			}
			want := append(slices.Clone(tir.GridParams), tir.GridOrder)
			if len(names) < len(want) || !slices.Equal(names[len(names)-len(want):], want) {
				t.Errorf("%s mask=%q: parameters %v do not end with %v", c.Kernel, mask, names, want)
			}
			if err := c.CheckParams(res.Params()); err != nil {
				t.Errorf("%s mask=%q: %v", c.Kernel, mask, err)
			}
		}
	}
}

// causalLists is a block mask of numQ q blocks shared over batch and
// heads, q block i with one partial block (its diagonal) and i full ones.
type causalLists struct{ numQ int }

func (m causalLists) Lists(bool) (counts, indices, fullCounts, fullIndices []int32) {
	counts, fullCounts = make([]int32, m.numQ), make([]int32, m.numQ)
	for i := range counts {
		counts[i], fullCounts[i] = 1, int32(i)
	}
	return counts, make([]int32, m.numQ*m.numQ), fullCounts, make([]int32, m.numQ*m.numQ)
}
func (m causalLists) Dims() (b, h, numQ, numK int) { return 1, 1, m.numQ, m.numQ }
func (m causalLists) RowLens() (kv, q int)         { return m.numQ, m.numQ }

// headLists is a block mask of b × h heads whose row (bh, q) has one
// partial block and 10·bh + q full ones (a cost per head and q tile).
type headLists struct{ numQ, b, h int }

func (m headLists) Lists(bool) (counts, indices, fullCounts, fullIndices []int32) {
	n := m.b * m.h * m.numQ
	counts, fullCounts = make([]int32, n), make([]int32, n)
	for i := range counts {
		counts[i], fullCounts[i] = 1, int32(10*(i/m.numQ)+i%m.numQ)
	}
	return counts, make([]int32, n*m.numQ), fullCounts, make([]int32, n*m.numQ)
}
func (m headLists) Dims() (b, h, numQ, numK int) { return m.b, m.h, m.numQ, m.numQ }
func (m headLists) RowLens() (kv, q int)         { return m.numQ, m.numQ }

// TestForwardTileCosts: flash_fwd's tile costs follow its tiles (the last
// q tile first, batch × head along y) and the block mask's counts, and a
// persistent call bound with them deals each round's longest tile first.
func TestForwardTileCosts(t *testing.T) {
	res, err := compiler.Compile(compiler.Request{Kernel: "flash_fwd", Mask: "causal", Consts: map[string]string{"persistent": "true", "BLOCK_M": "128", "BLOCK_N": "64"}})
	if err != nil {
		t.Fatal(err)
	}
	p := launch.Problem{Shape: launch.Shape{Batch: 2, Heads: 3, SeqQ: 1000, SeqK: 1000, Dim: 64}, Attrs: res.Attrs()}
	bm := causalLists{numQ: 8}
	tiles := attention.FlashFwd.Grid(p)
	costs := attention.FlashFwd.TileCosts(p, bm, tiles)
	if len(costs) != 8*6 {
		t.Fatalf("%d costs for tiles %v", len(costs), tiles)
	}
	for i, c := range costs {
		pm := 7 - i%8 // the q tile program x runs
		if want := 2*float64(2+pm) + 2.5; c != want {
			t.Fatalf("tile %d (q tile %d): cost %v, want %v (two 64-wide kv tiles per mask block)", i, pm, c, want)
		}
	}
	call, err := attention.FlashFwd.Bind(res.Params(), launch.Request{Problem: p, BlockMask: bm})
	if err != nil {
		t.Fatal(err)
	}
	call.Persist(5)
	seen := map[int32]bool{}
	for _, tile := range call.Order {
		seen[tile] = true
	}
	if len(call.Order) != 48 || len(seen) != 48 {
		t.Fatalf("order %v is not a permutation of the 48 tiles", call.Order)
	}
	// Round 0 holds tiles 0–4 (q tiles 7…3 of head 0): program 0 gets the
	// longest, and every program one of them.
	if !slices.Equal(call.Order[:5], []int32{0, 1, 2, 3, 4}) {
		t.Errorf("round 0 runs %v, want tiles 0…4, longest on program 0", call.Order[:5])
	}
	// Round 1 (tiles 5–9: q tiles 2, 1, 0 of head 0, then 7, 6 of head 1)
	// goes longest first (8, 9, 5, 6, 7) to the least loaded programs
	// (4, 3, 2, 1, 0): program q runs slot 5 + q.
	if want := []int32{7, 6, 5, 9, 8}; !slices.Equal(call.Order[5:10], want) {
		t.Errorf("round 1 runs %v, want %v", call.Order[5:10], want)
	}
}

// TestForwardHeadsMinor: with heads_minor the grid is (batch × head, q
// tiles), and the tile costs follow it: tile (bh, x) costs what heads-major
// tile (x, bh) does, so the first row of tiles is every head's last q tile.
func TestForwardHeadsMinor(t *testing.T) {
	p := launch.Problem{Shape: launch.Shape{Batch: 2, Heads: 3, SeqQ: 1000, SeqK: 1000, Dim: 64}}
	bm := causalLists{numQ: 8}
	var grids [2][3]int
	var costs [2][]float64
	for i, hm := range []string{"false", "true"} {
		res, err := compiler.Compile(compiler.Request{Kernel: "flash_fwd", Mask: "causal", Consts: map[string]string{"heads_minor": hm, "BLOCK_M": "128", "BLOCK_N": "64"}})
		if err != nil {
			t.Fatal(err)
		}
		p.Attrs = res.Attrs()
		grids[i] = attention.FlashFwd.Grid(p)
		costs[i] = attention.FlashFwd.TileCosts(p, bm, grids[i])
	}
	if grids[0] != [3]int{8, 6, 1} || grids[1] != [3]int{6, 8, 1} {
		t.Fatalf("grids %v and %v, want [8 6 1] and [6 8 1]", grids[0], grids[1])
	}
	for x := 0; x < 8; x++ {
		for bh := 0; bh < 6; bh++ {
			if a, b := costs[0][bh*8+x], costs[1][x*6+bh]; a != b {
				t.Fatalf("q tile %d of head %d: cost %v heads-major, %v heads-minor", 7-x, bh, a, b)
			}
		}
	}
	if costs[1][0] != costs[1][5] || costs[1][0] <= costs[1][6] {
		t.Errorf("heads-minor costs %v: want every head's last q tile first, the longest", costs[1][:12])
	}
}

// TestForwardHeadsGroup: with heads_minor and heads_group = 4 over 6
// heads, the groups are of 3 heads (the largest divisor of 6 up to 4): the
// grid is (3, q tiles, 2) and the launch order q tile by q tile across
// heads 0–2, then across heads 3–5. Tile i of that order (built here by
// enumeration) costs what its heads-major tile does, on a block mask whose
// rows differ by head and q tile.
func TestForwardHeadsGroup(t *testing.T) {
	p := launch.Problem{Shape: launch.Shape{Batch: 2, Heads: 3, SeqQ: 1000, SeqK: 1000, Dim: 64}}
	bm := headLists{numQ: 8, b: 2, h: 3}
	var costs [2][]float64
	for i, c := range []map[string]string{{"BLOCK_M": "128", "BLOCK_N": "64"}, {"BLOCK_M": "128", "BLOCK_N": "64", "heads_minor": "true", "heads_group": "4"}} {
		res, err := compiler.Compile(compiler.Request{Kernel: "flash_fwd", Mask: "causal", Consts: c})
		if err != nil {
			t.Fatal(err)
		}
		p.Attrs = res.Attrs()
		grid := attention.FlashFwd.Grid(p)
		if want := [][3]int{{8, 6, 1}, {3, 8, 2}}[i]; grid != want {
			t.Fatalf("%v: grid %v, want %v", c, grid, want)
		}
		costs[i] = attention.FlashFwd.TileCosts(p, bm, grid)
	}
	i := 0
	for _, heads := range [][]int{{0, 1, 2}, {3, 4, 5}} {
		for x := 0; x < 8; x++ {
			for _, bh := range heads {
				if a, b := costs[0][bh*8+x], costs[1][i]; a != b {
					t.Fatalf("launch slot %d (q tile %d of head %d): cost %v, want %v", i, 7-x, bh, b, a)
				}
				i++
			}
		}
	}
}

// TestForwardHeadsGroupRefused: a negative heads_group is refused at the
// call; one without heads_minor changes nothing (the tuned sets add it to
// kernels without heads_minor too).
func TestForwardHeadsGroupRefused(t *testing.T) {
	p := launch.Problem{Shape: launch.Shape{Batch: 2, Heads: 3, SeqQ: 1000, SeqK: 1000, Dim: 64}}
	for _, c := range []map[string]string{{"heads_minor": "true", "heads_group": "-1"}, {"heads_group": "8"}} {
		maps.Copy(c, map[string]string{"BLOCK_M": "128", "BLOCK_N": "64"})
		res, err := compiler.Compile(compiler.Request{Kernel: "flash_fwd", Mask: "causal", Consts: c})
		if err != nil && c["heads_group"] == "-1" && strings.Contains(err.Error(), "heads_group = -1") {
			continue // refused when compiled, before any call (issue 46 item 12)
		}
		if err != nil {
			t.Fatal(err)
		}
		p.Attrs = res.Attrs()
		_, err = attention.FlashFwd.Bind(res.Params(), launch.Request{Problem: p, BlockMask: causalLists{numQ: 8}})
		if c["heads_minor"] == "" {
			if g := attention.FlashFwd.Grid(p); err != nil || g != [3]int{8, 6, 1} {
				t.Errorf("%v: err = %v, grid %v; want heads-major's (8, 6, 1)", c, err, g)
			}
			continue
		}
		if err == nil || !strings.Contains(err.Error(), "heads_group = "+c["heads_group"]) {
			t.Errorf("%v: err = %v, want heads_group refused", c, err)
		}
	}
}

// TestForwardConsumerGroups: with consumer_groups = G a program covers G
// q tiles, so the grid's first axis is cdiv(seqlen_q, G·BLOCK_M); the
// groups must share a block-mask row, and a persistent launch does not
// go with them; with heads_minor (and heads_group) the program rows are
// the grid's second axis.
func TestForwardConsumerGroups(t *testing.T) {
	p := launch.Problem{Shape: launch.Shape{Batch: 2, Heads: 3, SeqQ: 1000, SeqK: 1000, Dim: 64}}
	compile := func(consts map[string]string) launch.Problem {
		t.Helper()
		res, err := compiler.Compile(compiler.Request{Kernel: "flash_fwd", Mask: "causal", Consts: consts})
		if err != nil {
			t.Fatal(err)
		}
		q := p
		q.Attrs = res.Attrs()
		return q
	}
	g3 := map[string]string{"consumer_groups": "3", "BLOCK_M": "64", "BLOCK_N": "128", "HEAD_DIM": "64", "SPARSE_Q": "192"}
	q := compile(g3)
	if g := attention.FlashFwd.Grid(q); g != [3]int{6, 6, 1} {
		t.Errorf("grid %v, want [6 6 1] (1000 rows in programs of 192)", g)
	}
	if err := attention.FlashFwd.Check(q); err != nil {
		t.Errorf("check: %v", err)
	}
	for _, c := range []struct {
		set, want string
	}{
		{"SPARSE_Q=128", "consumer_groups = 3: mask blocks of 128 rows must be multiples of the groups' 3×64 rows (--const SPARSE_Q=192)"},
		{"persistent=true", "consumer_groups = 3: not with persistent"},
	} {
		consts := maps.Clone(g3)
		k, v, _ := strings.Cut(c.set, "=")
		consts[k] = v
		if err := attention.FlashFwd.Check(compile(consts)); err == nil || err.Error() != c.want {
			t.Errorf("%s: err = %v, want %s", c.set, err, c.want)
		}
	}
	// heads_minor at 2000 rows: (B × H, 11 program rows); with
	// heads_group 4 of the 6 heads, groups of 3: (3, 11, 2).
	for _, c := range []struct {
		group string
		want  [3]int
	}{{"0", [3]int{6, 11, 1}}, {"4", [3]int{3, 11, 2}}} {
		consts := maps.Clone(g3)
		consts["heads_minor"], consts["heads_group"] = "true", c.group
		q := compile(consts)
		q.Shape.SeqQ = 2000
		if err := attention.FlashFwd.Check(q); err != nil {
			t.Errorf("heads_group %s: check: %v", c.group, err)
		}
		if g := attention.FlashFwd.Grid(q); g != c.want {
			t.Errorf("heads_group %s: grid %v, want %v", c.group, g, c.want)
		}
	}
}
