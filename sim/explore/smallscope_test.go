package explore

import (
	"slices"
	"strings"
	"testing"
)

// everyTree writes, independently of Trees, every agent tree of at most n
// agents the small-scope grammar allows — a leaf shape, or a delegation
// to one child or to two leaves — each once, children in sorted order.
func everyTree(n int) []string {
	leaves := []string{"T", "S", "I", "H"}
	var grow func(budget int) []string
	grow = func(budget int) []string {
		out := slices.Clone(leaves)
		if budget < 2 {
			return out
		}
		for _, c := range grow(budget - 1) {
			out = append(out, "D["+c+"]")
		}
		if budget >= 3 {
			for _, a := range leaves {
				for _, b := range leaves {
					if a <= b {
						out = append(out, "D["+a+","+b+"]")
					}
				}
			}
		}
		return out
	}
	var out []string
	for _, t := range grow(n) {
		if !slices.Contains(out, t) {
			out = append(out, t)
		}
	}
	slices.Sort(out)
	return out
}

// TestTreesAreEveryTree: the small-scope worlds are every tree of the
// grammar, each once (a world dropped would leave an exploration that
// still says "exhaustive"): 4, 8 and 22 trees of at most 1, 2 and 3
// agents.
func TestTreesAreEveryTree(t *testing.T) {
	for n, want := range map[int]int{1: 4, 2: 8, 3: 22} { // determinism: each size on its own
		// Siblings are an unordered pair: compared with their
		// children sorted, and twice the same pair is a duplicate.
		var got []string
		for _, tr := range Trees(n) {
			got = append(got, canonical(tr.String()))
		}
		slices.Sort(got)
		if all := everyTree(n); !slices.Equal(got, all) || len(all) != want {
			t.Errorf("Trees(%d) = %v\nwant the %d trees %v", n, got, want, all)
		}
		for _, w := range Worlds(n) {
			if w.Tree.Size() > n || len(w.Alphabet) != 2+w.Tree.Size() {
				t.Errorf("world %s: %d agents, alphabet of %d", w.Tree, w.Tree.Size(), len(w.Alphabet))
			}
		}
	}
}

// canonical sorts the two children of a D[a,b] of leaves by name.
func canonical(s string) string {
	inner, ok := strings.CutPrefix(s, "D[")
	if !ok || !strings.Contains(inner, ",") || strings.Contains(inner, "[") {
		return s
	}
	parts := strings.Split(strings.TrimSuffix(inner, "]"), ",")
	slices.Sort(parts)
	return "D[" + strings.Join(parts, ",") + "]"
}
