package passes

import "fmt"

// Constraint says that pass Before must run before pass After wherever a
// pipeline runs both, and why.
type Constraint struct {
	Before, After string
	Why           string
}

// Order lists the constraints on the order of passes, as cmd/compile's
// ssa passOrder does: Table and every pipeline are checked against it
// (Pipeline.Check), so the reasons live here instead of in comments.
var Order = []Constraint{
	{"specialize-mask", "inline", "specialize-mask finds mask calls by their callee's role = mask, which inlining erases"},
	{"inline", "pad-dims", "the mods' bodies compute on the kernel's tiles only once inlined, and a call is left unpadded"},
	{"pad-dims", "cse", "each padded load and store builds its own mask of real lanes, which cse makes one per shape"},
	{"inline", "persistent", "a program_id inside a mod's body is replaced only once the mod is inlined"},
	{"persistent", "cse", "the index arithmetic the loop adds (t / grid.x) meets the body's own, which cse then shares"},
	{"inline", "canonicalize", "constants passed to mods (seqlens, compile-time conditions) fold only once the mods' bodies are inlined"},
	{"canonicalize", "cse", "folding rewrites identities (x*1, x+0) to their operands, which lets cse match more ops"},
	{"canonicalize", "dce", "canonicalize leaves the ops its folds made unused for dce to delete"},
	{"canonicalize", "sink-select", "canonicalize takes the ifs whose condition is constant, so only run-time branches get a select each"},
	{"cse", "sink-select", "cse merges the -inf constants, so a select's operands are one value available before the if"},
	{"sink-select", "overlap-softmax", "overlap-softmax copies the loop body's softmax, whose masked scores should already be selected in their branches"},
	{"canonicalize", "mask-range", "constants passed to mods (window sizes, seqlens) fold first, so a bound is a constant where it can be"},
	{"sink-select", "mask-range", "sink-select puts the mask's select in the branch where the mask is known partial, so its condition is the whole mask there"},
	{"mask-range", "overlap-softmax", "overlap-softmax copies the loop body's masked select, which should already carry the range"},
	{"mask-range", "dce", "the rewrite leaves the replaced comparisons unused for dce to delete"},
	{"canonicalize", "fold-scale", "the identity score mod's body folds away first, so the scores' multiply is read by the softmax alone"},
	{"cse", "fold-scale", "cse makes the scores' multiply and the -inf constants one value each, so every use of the scores is seen"},
	{"fold-scale", "dce", "the fold leaves the log2(e) constants it replaced unused for dce to delete"},
	{"cse", "fuse-dot-acc", "cse merges the zero constants and the copies of an operand, so the dot's result has one use to fuse with"},
	{"fuse-dot-acc", "dce", "fusing leaves the zero accumulators unused for dce to delete"},
	{"fuse-dot-acc", "overlap-softmax", "overlap-softmax moves a dot that accumulates onto the rescaled loop-carried value, the form fusing gives attention's P·V"},
	{"persistent", "persistent-prefetch", "the prefetch reads ahead in the tile loop the persistent pass makes"},
	{"cse", "persistent-prefetch", "cse shares the header's address arithmetic with the body's, so the loads the prefetch clones are the kernel's own, once"},
	{"overlap-softmax", "persistent-prefetch", "the next tile's header is loaded after the tile's last region, which includes the tail branch overlap-softmax adds after the kv loop"},
	{"persistent-prefetch", "dce", "the loads the prefetch replaces by carried values leave address arithmetic for dce to delete"},
	{"overlap-softmax", "dce", "the rotated dot leaves the body's own B load unused for dce to delete"},
}

// checkOrder reports the first constraint of Order that names violates.
func checkOrder(names []string) error {
	at := map[string]int{}
	for i, n := range names {
		at[n] = i
	}
	for _, c := range Order {
		b, okB := at[c.Before]
		a, okA := at[c.After]
		if okB && okA && b > a {
			return fmt.Errorf("%s must run before %s: %s", c.Before, c.After, c.Why)
		}
	}
	return nil
}
